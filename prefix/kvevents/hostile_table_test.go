package kvevents_test

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/prefix/kvevents"
)

// hostileOutcomes is what one Decode makes of each hostile payload: the error it must
// wrap ErrMalformed with ("" for a payload that decodes), and whether what it may
// allocate is refusedAlloc (a refused payload: nothing sized by what it declares) or
// decodedAlloc per payload byte.
var hostileOutcomes = map[string]string{
	"nested arrays in a trailing element": "value nested too deeply",
	"nested arrays in an unknown map key": "value nested too deeply",
	"1-byte integer hashes":               "payload builds more than its size allows",
	"1-byte bin hashes":                   "payload builds more than its size allows",
	"AllBlocksCleared flood":              "",
	"empty extra-key tuples":              "payload builds more than its size allows",
	"1-byte extra keys":                   "payload builds more than its size allows",
	"1-byte tokens":                       "",
	"2^32-1 hashes declared":              "array of 4294967295 elements in",
	"4 GiB lora_name declared":            "string of 4294967295 bytes in",
}

const (
	// refusedAlloc bounds what a refused payload may allocate, whatever its size: the
	// Decoder's own few buffers, nothing sized by a declared length (the 2^32-1 hashes
	// would be 160 GiB of ExternalHash, the 1-byte hashes of 4 MiB 160 MiB).
	refusedAlloc = 64 << 10
	// decodedAlloc bounds what a payload that decodes may allocate per payload byte (the
	// worst left is the AllBlocksCleared flood, 27x: a 200-byte Event per 18 bytes, in
	// doubling arenas).
	decodedAlloc = 32
)

// TestHostileTable decodes each hostile payload once and asserts its outcome: the typed
// error of hostileOutcomes, and what the Decode allocated within refusedAlloc (refused) or
// decodedAlloc times the payload (decoded). It runs at 1 MiB per payload, and with
// KVPAGE_HOSTILE_TABLE=1 at 4 MiB, printing bench/README.md's rows: the time of one Decode
// and what it allocated, with the garbage collector off, so that the allocation is the peak
// heap it needs:
//
//	KVPAGE_HOSTILE_TABLE=1 go test -run TestHostileTable -v ./prefix/kvevents/
func TestHostileTable(t *testing.T) {
	size, print := 1<<20, os.Getenv("KVPAGE_HOSTILE_TABLE") != ""
	if print {
		size = 4 << 20
	}
	payloads := hostilePayloads(size)
	names := make([]string, 0, len(payloads))
	for n := range payloads {
		names = append(names, n)
	}
	slices.Sort(names)
	require.Len(t, hostileOutcomes, len(names), "an outcome for every payload")
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
		got := after.TotalAlloc - before.TotalAlloc
		t.Run(name, func(t *testing.T) {
			if want := hostileOutcomes[name]; want != "" {
				require.ErrorIs(t, err, kvevents.ErrMalformed)
				require.ErrorContains(t, err, want)
				require.LessOrEqual(t, got, uint64(refusedAlloc), "a refused payload of %d bytes allocated %d", len(p), got)
				return
			}
			require.NoError(t, err)
			require.LessOrEqual(t, got, uint64(decodedAlloc*len(p)), "allocated %d bytes for a payload of %d (%.1fx)", got, len(p), float64(got)/float64(len(p)))
		})
		if print {
			outcome := "decoded"
			if err != nil {
				outcome = err.Error()
			}
			fmt.Printf("| %s | %.1f MiB | %.3f s | %.1f MB (%.1fx) | %s |\n", name, float64(len(p))/(1<<20), el.Seconds(),
				float64(got)/1e6, float64(got)/float64(len(p)), outcome)
		}
	}
}
