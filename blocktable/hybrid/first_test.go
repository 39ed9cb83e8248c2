package hybrid

import (
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/stretchr/testify/require"
)

// store.first reads the tree's list heads unchecked (internal/trusted.GroupHeads); for
// every node of the tree and every group it must agree with GroupTree.First, the checked
// reader, also after the tree grew its arrays and freed nodes.
func TestStoreFirstIsGroupTreeFirst(t *testing.T) {
	m, err := New(Config{Groups: []Spec{FullAttention{Block: 4}, SlidingWindow{Block: 4, Window: 8}}, NumBlocks: 40})
	require.NoError(t, err)
	for i := range 30 {
		id := blocktable.SeqID(i)
		prompt := make([]int32, 9+i%13)
		for j := range prompt {
			prompt[j] = int32(j%7 + i%3*100)
		}
		if _, err := m.Admit(id, &Request{Prompt: prompt, MaxTokens: len(prompt) + 4}); err != nil {
			require.ErrorIs(t, err, blocks.ErrOutOfBlocks)
			continue
		}
		require.NoError(t, m.Append(id, []int32{int32(i)}))
		if i%2 == 0 {
			require.NoError(t, m.Finish(id))
		}
		checked, cached := 0, 0
		for n := range m.st.t.Nodes() {
			for g := range m.ng {
				require.Equal(t, m.st.t.First(n, g), m.st.first(n, g), "node %d group %d", n, g)
				checked++
				if m.st.first(n, g) != blocks.NullID {
					cached++
				}
			}
		}
		require.Positive(t, checked)
		require.Positive(t, cached)
	}
}
