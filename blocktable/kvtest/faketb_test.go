package kvtest_test

import (
	"fmt"
	"strings"
)

// fakeTB records what the kit reports, so that tests can check that it fails a test when
// it should. Fatalf records too (the kit returns right after calling it).
type fakeTB struct {
	errors   []string
	fatals   []string
	cleanups []func()
}

func (f *fakeTB) Helper()           {}
func (f *fakeTB) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }
func (f *fakeTB) Errorf(format string, args ...any) {
	f.errors = append(f.errors, fmt.Sprintf(format, args...))
}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.fatals = append(f.fatals, fmt.Sprintf(format, args...))
}

// finish runs the cleanups, last registered first, as testing does.
func (f *fakeTB) finish() {
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
	f.cleanups = nil
}

func (f *fakeTB) report() string {
	return strings.Join(append(append([]string(nil), f.fatals...), f.errors...), "\n")
}
