package prefix

import (
	"bytes"
	"testing"

	"pgregory.net/rapid"
)

// maxSkipsInARow bounds how many drawn actions in a row may skip before the next one is
// run as a step that does nothing. rapid gives up on a test after 100 skips in a row
// ("can't find a valid (non-skipped) action"), and an input of one repeated byte makes it
// draw the same action every time: if that action cannot run in the machine's state, the
// run fails although the tree did nothing wrong. It is below rapid's 100.
const maxSkipsInARow = 50

// neverStuck wraps a fuzzed state machine's actions (not its "" check) so that a run cannot
// fail for want of a runnable action: after maxSkipsInARow skips in a row the next drawn
// action is a step that does nothing (no draw, no change; the check still runs). Fewer skips
// in a row, all a random run ever makes, leave rapid's resampling as it was, so the
// machines' seeds draw the same runs.
func neverStuck(actions map[string]func(*rapid.T)) map[string]func(*rapid.T) {
	skips := 0
	for name, f := range actions {
		if name == "" {
			continue
		}
		actions[name] = func(t *rapid.T) {
			if skips >= maxSkipsInARow {
				skips = 0
				return
			}
			skips++ // stays counted if f skips (rapid unwinds through here)
			f(t)
			skips = 0
		}
	}
	return actions
}

// TestFuzzMachinesRunOnRepeatedBytes feeds each fuzz target's state machine inputs of one
// repeated byte, which make rapid draw the same action again and again. A machine whose
// drawn action skips without drawing anything fails such an input with rapid's "can't find
// a valid (non-skipped) action": a failure of the harness, not of the tree, which CI's
// fuzz pass found in FuzzGroupTreeTierHolds (input "\x01\x01\xff*\xbf...RRRR...").
func TestFuzzMachinesRunOnRepeatedBytes(t *testing.T) {
	machines := []struct {
		name string
		run  func(*rapid.T)
	}{
		{"FuzzIndexOps", runMachine},
		{"FuzzTierHolds", runTierMachine},
		{"FuzzGroupTreeTierHolds", runGroupTreeTierMachine},
	}
	for _, m := range machines {
		fuzz := rapid.MakeFuzz(m.run)
		for b := range 256 {
			for _, prefix := range [][]byte{nil, []byte("\x01\x01\xff*\xbf\xbf\xbf\xbf\xbf\x03\x03\x03\xbf")} {
				input := append(bytes.Clone(prefix), bytes.Repeat([]byte{byte(b)}, 4096)...)
				t.Run(m.name, func(t *testing.T) { fuzz(t, input) })
			}
		}
	}
}
