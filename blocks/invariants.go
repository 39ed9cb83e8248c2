package blocks

import "fmt"

// CheckInvariants verifies the pool's structure and returns the first violation found: every
// usable block is either free (refcount 0, on the free list exactly once) or held (refcount
// > 0, not on the free list); no refcount is negative; the free count adds up; the null
// block is never free or held. It costs O(capacity) and allocates; it is for tests and for
// the kvinvariants build tag.
func (p *Pool) CheckInvariants() error {
	if p.nfree < 0 || p.nfree > len(p.ring) {
		return fmt.Errorf("free count %d outside [0, %d]", p.nfree, len(p.ring))
	}
	onFree := make([]bool, len(p.refs))
	for i := range p.nfree {
		id := p.ring[(p.head+i)%len(p.ring)]
		if id < 0 || int(id) >= len(p.refs) {
			return fmt.Errorf("free list holds unknown block %d", id)
		}
		if p.hasNull && id == NullID {
			return fmt.Errorf("free list holds the null block")
		}
		if onFree[id] {
			return fmt.Errorf("block %d is on the free list twice", id)
		}
		onFree[id] = true
	}
	zero := 0
	for id, r := range p.refs {
		if p.hasNull && id == int(NullID) {
			if r != 0 {
				return fmt.Errorf("null block has refcount %d", r)
			}
			continue
		}
		switch {
		case r < 0:
			return fmt.Errorf("block %d has negative refcount %d", id, r)
		case r == 0 && !onFree[id]:
			return fmt.Errorf("block %d has no holder but is not on the free list (leaked)", id)
		case r > 0 && onFree[id]:
			return fmt.Errorf("block %d has %d holders but is on the free list", id, r)
		}
		if r == 0 {
			zero++
		}
	}
	if zero != p.nfree {
		return fmt.Errorf("%d blocks have no holder but the free count is %d", zero, p.nfree)
	}
	return nil
}
