package testserver

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"
)

// Need skips t because what is not available (set env to provide it), or fails t when
// CI=true.
func Need(t testing.TB, what, env string) {
	t.Helper()
	msg := fmt.Sprintf("%s not available: set %s (bash .ci/run starts one and sets it)", what, env)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// Binary returns the server binary named by the variable env, else name found on PATH,
// else skips or fails t as Need does.
func Binary(t testing.TB, env, name string) string {
	t.Helper()
	if bin := os.Getenv(env); bin != "" {
		return bin
	}
	bin, err := exec.LookPath(name)
	if err != nil {
		Need(t, name+" binary", env+" or PATH")
	}
	return bin
}

// FreePort returns a loopback TCP port nothing listens on at the moment of the call.
func FreePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(l.Addr().String())
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return port
}

// Process is a server a test started itself, so that it may stop and restart it.
type Process struct {
	name  string
	args  []string
	ready func() bool
	cmd   *exec.Cmd
}

// Start runs bin with args and waits (up to 10 s) until ready reports true; the process is
// killed when the test ends.
func Start(t testing.TB, ready func() bool, bin string, args ...string) *Process {
	t.Helper()
	p := &Process{name: bin, args: args, ready: ready}
	p.Restart(t)
	t.Cleanup(p.Stop)
	return p
}

// Restart starts the process again after Stop, and waits until it is ready.
func (p *Process) Restart(t testing.TB) {
	t.Helper()
	p.cmd = exec.Command(p.name, p.args...)
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Waiting on a real process's start-up is the one place a deadline is the right test
	// of readiness; no decision of the code under test depends on it.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if p.ready() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s %v did not become ready", p.name, p.args)
}

// Stop kills the process and waits for it to exit. Stopping a stopped process does nothing.
func (p *Process) Stop() {
	if p.cmd != nil && p.cmd.Process != nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
		p.cmd = nil
	}
}

// Listening reports whether something accepts TCP connections at addr.
func Listening(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}
