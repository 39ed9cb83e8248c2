package kvtest_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kvpage/kvpage/blocktable/kvtest"
)

// FuzzScenario feeds arbitrary scripts to the scenario runner: every line is a command,
// malformed ones are skipped, and after each command the whole stack must keep its
// invariants (refcounts equal holders, conservation). At the end every sequence is
// aborted and the leak check that New registered must find nothing. The seed corpus is
// every scenario file in testdata plus testdata/fuzz/FuzzScenario.
func FuzzScenario(f *testing.F) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil {
		f.Fatal(err)
	}
	for _, p := range files {
		src, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(src))
	}
	f.Fuzz(func(t *testing.T, script string) {
		if len(script) > 8<<10 {
			return
		}
		r := kvtest.NewLenientRunner(t)
		for _, line := range strings.Split(script, "\n") {
			if strings.TrimSpace(line) == "" || tooBig(line) {
				continue
			}
			if _, err := r.Exec(line); err != nil {
				continue // a malformed command or a failed expect: not the stack's fault
			}
			if err := r.Env().Check(); err != nil {
				t.Fatalf("after %q: %v\n%s", line, err, r.Env().Dump())
			}
		}
		r.Env().Heal()
		r.Env().AbortAll()
	})
}

// tooBig skips configurations far beyond what a scenario needs: the full invariant check
// after every command costs O(blocks x tree depth), and a fuzzer stuck on 4,096-block
// chains explores nothing.
func tooBig(line string) bool {
	f := strings.Fields(line)
	if len(f) == 0 || f[0] != "config" {
		return false
	}
	for _, w := range f[1:] {
		k, v, _ := strings.Cut(w, "=")
		n, err := strconv.Atoi(v)
		if err == nil && ((k == "blocks" || k == "host") && n > 64 || k == "bs" && n > 16) {
			return true
		}
	}
	return false
}
