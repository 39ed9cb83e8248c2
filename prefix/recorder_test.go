package prefix

import "github.com/kvpage/kvpage/blocks"

// recorder is an Observer for tests.
type recorder struct {
	onStored  func(e *BlockStored)
	onRemoved func(ids []blocks.ID)
	onCleared func()
}

func (r *recorder) BlockStored(e *BlockStored) {
	if r.onStored != nil {
		r.onStored(e)
	}
}

func (r *recorder) BlockRemoved(e *BlockRemoved) {
	if r.onRemoved != nil {
		r.onRemoved(append([]blocks.ID(nil), e.Blocks...))
	}
}

func (r *recorder) AllBlocksCleared() {
	if r.onCleared != nil {
		r.onCleared()
	}
}

// SetObserverForTest swaps the observer of a running index.
func (x *Index) SetObserverForTest(o Observer) { x.obs = o }

func (r *request) ids0(i int) blocks.ID { return r.ids[i] }
