package prefix

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
)

// A node is 32 bytes, two to a 64-byte cache line and none straddling two (nodeCold holds
// the fields the per-block passes never read); the simulator's sharing run and W3 touch a
// node line per block committed, released, acquired and evicted.
func TestNodeFillsHalfACacheLine(t *testing.T) {
	assert.Equal(t, uintptr(32), unsafe.Sizeof(node{}))
	assert.Equal(t, uintptr(8), unsafe.Sizeof(nodeCold{}))
}
