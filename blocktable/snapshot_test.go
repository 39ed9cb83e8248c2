package blocktable

import (
	"reflect"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// encode and decode carry every field of Snapshot: each field set to its own value
// survives the round trip, so a field added to Stats or prefix.Stats and forgotten there
// fails this test.
func TestSnapshotEncodesEveryField(t *testing.T) {
	var s Snapshot
	n := 0
	var fill func(v reflect.Value)
	fill = func(v reflect.Value) {
		for i := range v.NumField() {
			f := v.Field(i)
			switch f.Kind() {
			case reflect.Struct:
				fill(f)
			case reflect.Int:
				n++
				f.SetInt(int64(n))
			case reflect.Uint64:
				n++
				f.SetUint(uint64(n))
			default:
				t.Fatalf("field %s of kind %s: encode it", v.Type().Field(i).Name, f.Kind())
			}
		}
	}
	fill(reflect.ValueOf(&s).Elem())
	require.Equal(t, snapshotWords, n)
	w := s.encode()
	var got Snapshot
	got.decode(&w)
	require.Equal(t, s, got)
}

// Load returns exactly what Publish saw, and a reader racing a publisher only ever sees
// whole snapshots (run with -race: no data race either).
func TestStatsCellPublishLoad(t *testing.T) {
	s := newStack(t, 64, 4, Config{})
	var cell StatsCell
	require.Equal(t, Snapshot{}, cell.Load())
	_, err := s.m.Admit(1, &Request{Prompt: seqOf(13, 1)})
	require.NoError(t, err)
	cell.Publish(s.m)
	got := cell.Load()
	require.Equal(t, s.m.Stats(), got.Stats)
	require.Equal(t, s.idx.Stats(), got.Index)
	require.Equal(t, uint64(1), got.Seq)

	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		last := uint64(0)
		for {
			select {
			case <-done:
				return
			default:
			}
			snap := cell.Load()
			// Within one publication the counters agree with each other.
			if snap.Admitted != uint64(snap.Running)+snap.Finished {
				t.Errorf("torn snapshot: %d admitted, %d running, %d finished", snap.Admitted, snap.Running, snap.Finished)
				return
			}
			if snap.Seq < last {
				t.Errorf("publication %d after %d", snap.Seq, last)
				return
			}
			last = snap.Seq
		}
	}()
	for i := 2; i < 400; i++ {
		_, err := s.m.Admit(SeqID(i), &Request{Prompt: seqOf(9, int32(i))})
		require.NoError(t, err)
		cell.Publish(s.m)
		require.NoError(t, s.m.Finish(SeqID(i)))
		cell.Publish(s.m)
	}
	close(done)
	wg.Wait()
	allocs := testing.AllocsPerRun(50, func() { cell.Publish(s.m); _ = cell.Load() })
	require.Zero(t, allocs)
	s.done(t)
}
