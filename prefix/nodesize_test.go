package prefix

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
)

// A node is 64 bytes, one cache line: a block's own state (but its tokens) lies on one
// line, which a commit, a release, an acquire and an eviction each touch once.
func TestNodeFillsACacheLine(t *testing.T) {
	assert.Equal(t, uintptr(64), unsafe.Sizeof(node{}))
}
