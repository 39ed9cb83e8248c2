package kvevents_test

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"testing"
	"time"

	"github.com/kvpage/kvpage/prefix/kvevents"
)

// TestHostileTable prints bench/README.md's rows for the decoder's hostile payloads: the
// time of one Decode and what it allocated (with the garbage collector off, so that the
// allocation is the peak heap it needs). It measures, it asserts nothing; it runs only
// with KVPAGE_HOSTILE_TABLE=1:
//
//	KVPAGE_HOSTILE_TABLE=1 go test -run TestHostileTable -v ./prefix/kvevents/
func TestHostileTable(t *testing.T) {
	if os.Getenv("KVPAGE_HOSTILE_TABLE") == "" {
		t.Skip("set KVPAGE_HOSTILE_TABLE=1 to print the table")
	}
	const size = 4 << 20
	payloads := hostilePayloads(size)
	names := make([]string, 0, len(payloads))
	for n := range payloads {
		names = append(names, n)
	}
	slices.Sort(names)
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	for _, name := range names {
		p := payloads[name]
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		t0 := time.Now()
		var d kvevents.Decoder
		var b kvevents.Batch
		err := d.Decode(p, &b)
		el := time.Since(t0)
		runtime.ReadMemStats(&after)
		outcome := "decoded"
		if err != nil {
			outcome = err.Error()
		}
		fmt.Printf("| %s | %.1f MiB | %.3f s | %.1f MB (%.1fx) | %s |\n", name, float64(len(p))/(1<<20), el.Seconds(),
			float64(after.TotalAlloc-before.TotalAlloc)/1e6, float64(after.TotalAlloc-before.TotalAlloc)/float64(len(p)), outcome)
	}
}
