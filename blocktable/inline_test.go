package blocktable

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDecodeStepInlines keeps the decode step in line: Table.appendInLast is written to fit
// the compiler's inlining budget (cost 79 of 80), and a field or a test added to it can
// push it over without any test failing, costing W3 about 2.5% of its instructions (it did
// once, when Reserved was added). It asks the compiler (go build -gcflags=-m) whether it
// can inline it.
func TestDecodeStepInlines(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the package with the compiler's diagnostics")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	}
	const pkg = "github.com/kvpage/kvpage/blocktable"
	cmd := exec.Command(gobin, "build", "-gcflags="+pkg+"=-m", "-o", os.DevNull, pkg)
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=readonly", "GOPROXY=off") // never the network
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go build -gcflags=-m: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "can inline (*Table).appendInLast") {
		t.Errorf("(*Table).appendInLast no longer inlines; the compiler says:\n%s", grep(string(out), "appendInLast"))
	}
}

func grep(s, sub string) string {
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, sub) {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}
