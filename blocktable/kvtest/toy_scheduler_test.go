package kvtest_test

import (
	"errors"
	"github.com/kvpage/kvpage/blocks"
	"slices"
	"testing"

	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/blocktable/kvtest"
)

// toyScheduler is the kind of code the kit is for: a minimal continuous-batching
// scheduler over a blocktable.Manager. Each step it admits waiting requests in order while
// they fit, then decodes one token for every running sequence; when a sequence cannot
// grow it preempts the newest other sequence (recompute mode: back to the head of the
// queue with everything computed so far) and retries, preempting the sequence itself if
// it is alone. A request finishes after its output tokens.
type toyScheduler struct {
	m       *blocktable.Manager
	waiting []*toyRequest
	running []*toyRequest
	steps   int
}

type toyRequest struct {
	id     blocktable.SeqID
	tokens []int32 // prompt plus output so far: what readmission computes again
	want   int     // output tokens to generate
	done   int
}

func (s *toyScheduler) Submit(id blocktable.SeqID, prompt []int32, output int) {
	s.waiting = append(s.waiting, &toyRequest{id: id, tokens: slices.Clone(prompt), want: output})
}

func (s *toyScheduler) Busy() bool { return len(s.waiting)+len(s.running) > 0 }

func (s *toyScheduler) Step() error {
	s.steps++
	for len(s.waiting) > 0 {
		r := s.waiting[0]
		_, err := s.m.Admit(r.id, &blocktable.Request{Prompt: r.tokens})
		if errors.Is(err, blocks.ErrOutOfBlocks) {
			break // wait for memory
		}
		if err != nil {
			return err
		}
		s.waiting = s.waiting[1:]
		s.running = append(s.running, r)
	}
	for i := 0; i < len(s.running); i++ {
		r := s.running[i]
		tok := int32(1000 + r.done)
		for {
			_, err := s.m.Append(r.id, []int32{tok}, 0)
			if err == nil {
				break
			}
			var oob *blocks.OutOfBlocksError
			if !errors.As(err, &oob) {
				return err
			}
			victims, err := s.m.Preempt(blocktable.PreemptRequest{Need: oob.Missing(), Protect: []blocktable.SeqID{r.id}}, nil)
			if errors.Is(err, blocks.ErrOutOfBlocks) {
				if _, err := s.m.PreemptSeq(r.id, blocktable.Recompute); err != nil {
					return err
				}
				s.requeue(r.id)
				i--
				break
			}
			if err != nil {
				return err
			}
			for _, v := range victims {
				if s.requeue(v.Seq) < i {
					i--
				}
			}
		}
		if i < 0 || i >= len(s.running) || s.running[i] != r {
			continue // r itself went back to the queue
		}
		r.tokens = append(r.tokens, tok)
		if r.done++; r.done == r.want {
			if err := s.m.Finish(r.id); err != nil {
				return err
			}
			s.running = slices.Delete(s.running, i, i+1)
			i--
		}
	}
	return nil
}

// requeue moves a preempted sequence from running to the head of the queue and returns
// the index it had.
func (s *toyScheduler) requeue(id blocktable.SeqID) int {
	for i, r := range s.running {
		if r.id == id {
			s.running = slices.Delete(s.running, i, i+1)
			s.waiting = append([]*toyRequest{r}, s.waiting...)
			return i
		}
	}
	return -1
}

// TestToyScheduler is the example of the package documentation: a scheduler's test
// written with the kit.
func TestToyScheduler(t *testing.T) {
	// 8 usable blocks of 4 tokens: three requests of 12 + 8 tokens cannot all run at once.
	env := kvtest.New(t, kvtest.Config{Blocks: 9, BlockSize: 4})
	s := &toyScheduler{m: env.Manager}
	for _, name := range []string{"r1", "r2", "r3"} {
		s.Submit(env.Seq(name), kvtest.MustTokens("0..11"), 8) // one shared prompt
	}
	env.FailAllocation(4) // and the 4th allocation fails: the OOM path must cope

	for s.Busy() {
		if err := s.Step(); err != nil {
			t.Fatal(err)
		}
		if err := env.Check(); err != nil { // refcounts = holders, conservation
			t.Fatalf("step %d: %v\n%s", s.steps, err, env.Dump())
		}
		if s.steps > 100 {
			t.Fatalf("no progress:\n%s", env.Dump())
		}
	}

	if env.Faults().Tripped != 1 {
		t.Errorf("the injected failure was not delivered")
	}
	if len(env.Preemptions.Choices()) == 0 {
		t.Errorf("the scheduler never had to preempt:\n%s", env.Log)
	}
	if st := env.Manager.Stats(); st.Finished != 3 || st.HitTokens == 0 {
		t.Errorf("finished %d, prefix hits %d tokens; want 3 and some", st.Finished, st.HitTokens)
	}
	// Nothing else to do: when the test ends, the kit fails it if any block is still held
	// (naming the sequences that held it) or any invariant is broken.
}
