package blocktable_test

// The README's Go code, verbatim: TestREADMECodeIsCompiledHere checks that every Go block of
// README.md appears in this file exactly, so the README's code compiles, and
// Example_server and TestServeFinishesEveryRequest run it.

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/blocktable/kvtest"
	"github.com/kvpage/kvpage/prefix"
	"github.com/stretchr/testify/require"
)

// README: Embedding it in a server (begin)

// newManager builds what a server embeds: a pool of numBlocks blocks of 16 tokens (block 0
// reserved as vLLM's null block), a prefix cache over it, and the Manager.
func newManager(numBlocks int) (*blocktable.Manager, error) {
	pool, err := blocks.New(numBlocks, blocks.WithNullBlock())
	if err != nil {
		return nil, err
	}
	index, err := prefix.New(pool, 16) // caches full blocks; evicts LRU leaves on demand
	if err != nil {
		return nil, err
	}
	return blocktable.New(blocktable.Config{Index: index}) // pool, block size, clock: the index's
}

// request is what the server tracks per request.
type request struct {
	id        blocktable.SeqID
	prompt    []int32
	generated []int32
	maxNew    int // tokens to generate
}

// serve runs every request to completion and returns the number of steps. Each step decodes
// one token of every running request (model stands for sampling it), then admits waiting
// requests while memory allows and prefills them.
func serve(m *blocktable.Manager, waiting []*request, model func(*request) int32) (int, error) {
	var running []*request // in admission order
	var victims []blocktable.Preempted
	var batch blocktable.Batch
	var ids []blocktable.SeqID
	var slots []int64 // the step's slot_mapping
	steps := 0
	for len(waiting) > 0 || len(running) > 0 {
		// Decode: a slot for each running request's next token.
		for i := 0; i < len(running); i++ {
			r := running[i]
			tok := model(r)
			step, err := m.AppendToken(r.id, tok)
			var oob *blocks.OutOfBlocksError
			if errors.As(err, &oob) {
				// Out of memory: preempt others (newest first), never the one growing; if
				// nobody else can make room, the growing one goes back to wait.
				victims, err = m.Preempt(blocktable.PreemptRequest{Need: oob.Missing(), Protect: []blocktable.SeqID{r.id}}, victims[:0])
				if errors.Is(err, blocks.ErrOutOfBlocks) {
					var self blocktable.Preempted
					self, err = m.PreemptSeq(r.id, blocktable.Recompute)
					victims = append(victims[:0], self)
				}
				if err != nil {
					return steps, err
				}
				for _, v := range victims { // the Manager forgot them: requeue at the front
					k := slices.IndexFunc(running, func(q *request) bool { return q.id == v.Seq })
					waiting = append([]*request{running[k]}, waiting...)
					running = slices.Delete(running, k, k+1)
					if k <= i {
						i--
					}
				}
				if i < 0 || running[i] != r {
					continue // r itself went back to wait
				}
				step, err = m.AppendToken(r.id, tok) // the retry: the room is there now
			}
			if err != nil {
				return steps, err
			}
			if step.Copied {
				_ = step.Copy // copy block Src to Dst on the device before this step
			}
			r.generated = append(r.generated, tok)
		}
		slots = slots[:0]
		for _, r := range running { // after every preemption: no victim's slot in the step
			slots = slices.Grow(slots, 1)
			n, err := m.FillSlots(r.id, len(r.prompt)+len(r.generated)-1, 0, slots[len(slots):cap(slots)])
			if err != nil {
				return steps, err
			}
			slots = slots[:len(slots)+n]
		}
		// Admit from the head of the queue while memory allows. A preempted request comes
		// back with what it generated; the prefix cache gives back what is still cached.
		for len(waiting) > 0 {
			r := waiting[0]
			toks := append(slices.Clone(r.prompt), r.generated...)
			res, err := m.Admit(r.id, &blocktable.Request{Prompt: toks, MaxTokens: len(r.prompt) + r.maxNew})
			if errors.Is(err, blocks.ErrOutOfBlocks) {
				break // wait for memory; nothing changed
			}
			if err != nil {
				return steps, err // ErrTooLarge: the pool can never hold it, reject it
			}
			slots = slices.Grow(slots, len(toks)) // prefill: slots of the tokens past the hit
			n, err := m.FillSlots(r.id, res.HitTokens, 0, slots[len(slots):cap(slots)])
			if err != nil {
				return steps, err
			}
			slots = slots[:len(slots)+n]
			waiting, running = waiting[1:], append(running, r)
		}
		if len(running) == 0 {
			return steps, fmt.Errorf("request %d does not fit even alone", waiting[0].id)
		}
		ids = ids[:0]
		for _, r := range running {
			ids = append(ids, r.id)
		}
		if err := m.Pack(&batch, ids); err != nil { // padded [batch x maxBlocks] int32 block tables
			return steps, err
		}
		steps++ // here the model runs on batch.Rows() and slots
		// Finish what is done: its full blocks stay cached for later prompts.
		var err error
		running = slices.DeleteFunc(running, func(r *request) bool {
			if len(r.generated) < r.maxNew {
				return false
			}
			err = errors.Join(err, m.Finish(r.id))
			return true
		})
		if err != nil {
			return steps, err
		}
	}
	return steps, nil
}

// README: Embedding it in a server (end)

// Example_server runs the README's loop over a pool too small for all its requests at once:
// sequences are preempted when one cannot grow, come back, and every request finishes.
func Example_server() {
	m, err := newManager(1 + 12) // 12 usable blocks of 16 tokens
	if err != nil {
		panic(err)
	}
	system := make([]int32, 32) // a shared system prompt: two full blocks
	var queue []*request
	for i := range 8 {
		prompt := append(slices.Clone(system), int32(100+i), int32(200+i))
		queue = append(queue, &request{id: blocktable.SeqID(i + 1), prompt: prompt, maxNew: 40})
	}
	model := func(r *request) int32 { return int32(len(r.generated)) }
	steps, err := serve(m, queue, model)
	st := m.Stats()
	fmt.Printf("steps %d, err %v\n", steps, err)
	fmt.Printf("admitted %d, finished %d, preemptions %d, running %d\n", st.Admitted, st.Finished, st.Preemptions, st.Running)
	fmt.Println("invariants:", m.CheckInvariants())
	// Output:
	// steps 79, err <nil>
	// admitted 14, finished 8, preemptions 6, running 0
	// invariants: <nil>
}

// README: Testing a scheduler against it (begin)
func TestServeFinishesEveryRequest(t *testing.T) {
	env := kvtest.New(t, kvtest.Config{Blocks: 9, BlockSize: 4}) // fails the test on a leak
	var queue []*request
	for i := range 5 {
		queue = append(queue, &request{id: blocktable.SeqID(i + 1), prompt: kvtest.MustTokens("0..9"), maxNew: 6})
	}
	env.FailAllocation(4) // the 4th allocation from now fails: the out-of-memory path
	_, err := serve(env.Manager, queue, func(r *request) int32 { return int32(len(r.generated)) })
	require.NoError(t, err)
	for _, r := range queue {
		require.Len(t, r.generated, r.maxNew)
	}
	require.Positive(t, env.Manager.Stats().Preemptions)
}

// README: Testing a scheduler against it (end)

// TestREADMECodeIsCompiledHere checks that README.md's Go blocks are, verbatim, the
// marked regions of this file: what the README shows is what this package compiles,
// and Example_server and TestServeFinishesEveryRequest run it.
func TestREADMECodeIsCompiledHere(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	self, err := os.ReadFile("readme_test.go")
	require.NoError(t, err)
	blocksIn := regexp.MustCompile("(?s)```go\n(.*?)```\n").FindAllStringSubmatch(string(readme), -1)
	var got []string
	for _, b := range blocksIn {
		got = append(got, b[1])
	}
	regions := regexp.MustCompile(`(?s)// README: ([^\n]*) \(begin\)\n\n?(.*?)\n?// README: [^\n]* \(end\)\n`).FindAllStringSubmatch(string(self), -1)
	var want []string
	for _, r := range regions {
		want = append(want, strings.TrimLeft(r[2], "\n"))
	}
	require.Len(t, want, 2, "the marked regions of readme_test.go")
	require.Len(t, got, len(want), "README.md's Go blocks: one per marked region of readme_test.go")
	for i := range want {
		if want[i] != got[i] {
			t.Errorf("README.md's Go block %d differs from readme_test.go's region %q; copy the region into the README", i+1, regions[i][1])
		}
	}
}
