package bench

import (
	"runtime"
	"syscall"
	"time"
	"unsafe"
)

// kvThreadCPU returns the CPU time of the calling OS thread (CLOCK_THREAD_CPUTIME_ID): with
// the goroutine locked to its thread, what the scheduler's goroutine itself spent, without
// the publisher's goroutines, ZeroMQ's, the garbage collector's workers or the time it sat
// descheduled on this shared machine. It returns 0 where the clock is unavailable.
func kvThreadCPU() time.Duration {
	const clockThreadCPUTimeID = 3
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return 0
	}
	return time.Duration(ts.Nano())
}

// kvOnThread runs f with the goroutine locked to its OS thread and returns f's thread CPU time.
func kvOnThread(f func()) time.Duration {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start := kvThreadCPU()
	f()
	return kvThreadCPU() - start
}
