package depcheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// embedded are the packages a server embeds. blocktable/kvprom (Prometheus), prefix/kvevents
// (msgpack, ZeroMQ), prefix/cluster (Redis) and bench/ (plotting, the CLI) live beside them
// precisely so that these stay free of their dependencies.
var embedded = []string{
	"github.com/kvpage/kvpage/blocks",
	"github.com/kvpage/kvpage/blocks/sizing",
	"github.com/kvpage/kvpage/evict",
	"github.com/kvpage/kvpage/prefix",
	"github.com/kvpage/kvpage/blocktable",
	"github.com/kvpage/kvpage/blocktable/hybrid",
}

// allowed says whether an embedded package may depend on path: the standard library, the
// embedded packages themselves and internal/, and the dependencies chosen for them.
func allowed(path string, std bool) bool {
	if std {
		return true
	}
	for _, p := range embedded {
		if path == p {
			return true
		}
	}
	return strings.HasPrefix(path, "github.com/kvpage/kvpage/internal/") ||
		path == "github.com/google/btree" || // evict.NewPriority's ordered set
		strings.HasPrefix(path, "golang.org/x/exp/")
}

// forbidden names what must never appear, to say in a failure what kind of dependency
// crept in (the allow-list alone would catch it too).
var forbidden = map[string]string{
	"msgpack": "msgpack", "zmq": "ZeroMQ", "zeromq": "ZeroMQ", "nats": "NATS", "redis": "Redis",
	"net": "network", "gonum.org/v1/plot": "plotting", "progressbar": "CLI", "x/term": "CLI",
	"prometheus": "metrics", "cbor": "CBOR codec",
}

// TestEmbeddedPackagesImportNoHeavyDependency runs go list -deps on the embedded packages
// and fails on any dependency outside the allow-list.
func TestEmbeddedPackagesImportNoHeavyDependency(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	}
	args := append([]string{"list", "-deps", "-f", "{{.ImportPath}} {{.Standard}}"}, embedded...)
	cmd := exec.Command(gobin, args...)
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=readonly", "GOPROXY=off") // never the network
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, std, _ := strings.Cut(line, " ")
		n++
		for frag, kind := range forbidden {
			hit := strings.Contains(path, frag)
			if std == "true" { // only the standard library's network packages
				hit = frag == "net" && (path == "net" || strings.HasPrefix(path, "net/"))
			}
			if hit {
				t.Errorf("%s: a %s dependency in an embedded package", path, kind)
			}
		}
		if !allowed(path, std == "true") {
			t.Errorf("%s: not an allowed dependency of the embedded packages", path)
		}
	}
	if n < len(embedded) {
		t.Fatalf("go list listed %d packages for %d embedded ones:\n%s", n, len(embedded), out)
	}
}
