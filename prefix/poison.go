package prefix

import (
	"math"

	"github.com/kvpage/kvpage/internal/invariant"
)

// poisonToken is what the tokens of a block that left the index read as under the
// kvinvariants build tag (and -race): anything still reading them, a stale cursor or a
// table that kept a freed block, compares against garbage and fails loudly instead of
// quietly matching stale KV.
const poisonToken int32 = -0x0badf00d

// poisonFreed overwrites the metadata of block node n, just unlinked from the tree, when
// invariant checking is on. In a normal build it compiles away.
func (x *Index) poisonFreed(n int32) {
	if !invariant.Enabled {
		return
	}
	toks := x.blockTokens(n)
	for i := range toks {
		toks[i] = poisonToken
	}
	nd := &x.nodes[n]
	nd.key = 0xdeadbeefdeadbeef
	nd.lastAccess = math.MaxUint64
	x.nodes[n].hits = math.MaxUint32
}
