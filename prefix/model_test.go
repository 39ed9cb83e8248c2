package prefix

import (
	"encoding/binary"
	"sort"
	"strings"

	"github.com/kvpage/kvpage/blocks"
)

// model is the reference the state-machine test holds the index to: a map from (namespace,
// token prefix) to the block caching that prefix's last block, with LRU by last use on a
// logical clock, leaf-only eviction, and the holders of each cached block. Everything is
// computed the slow, obvious way.
type model struct {
	entries map[string]*mentry
	byID    map[blocks.ID]string
	holders map[blocks.ID]int // request references on cached blocks
	clock   uint64
	bs      int
	pairs   bool // multimodal keys are (identifier, offset) pairs
}

type mentry struct {
	id         blocks.ID
	parent     string // "" for a namespace's first block
	children   int
	lastAccess uint64
}

func newModel(bs int) *model {
	return &model{entries: map[string]*mentry{}, byID: map[blocks.ID]string{}, holders: map[blocks.ID]int{}, bs: bs}
}

// mkey names the prefix of the first n blocks of p.
func (m *model) key(p *Prompt, n int) string {
	bs := m.bs
	if n == 0 {
		return ""
	}
	b := []byte(p.Namespace.LoRA + "\x00" + p.Namespace.Salt + "\x00")
	for blk := 0; blk < n; blk++ {
		for _, t := range p.Tokens[blk*bs : (blk+1)*bs] {
			b = binary.LittleEndian.AppendUint32(b, uint32(t))
		}
		for _, in := range p.MM { // the inputs that overlap this block, the obvious way
			if in.Length > 0 && in.Offset < (blk+1)*bs && in.Offset+in.Length > blk*bs {
				b = append(b, in.Hash...)
				b = append(b, 0)
				if m.pairs { // (identifier, offset): where the input starts, from this block
					b = binary.LittleEndian.AppendUint64(b, uint64(in.Offset-blk*bs))
				}
			}
		}
		b = append(b, 0xff)
	}
	return string(b)
}

func (m *model) match(p *Prompt, leaveOne bool) []blocks.ID {
	n := len(p.Tokens)
	if leaveOne {
		n--
	}
	var out []blocks.ID
	for b := 1; b <= n/m.bs; b++ {
		e, ok := m.entries[m.key(p, b)]
		if !ok {
			break
		}
		out = append(out, e.id)
	}
	return out
}

func (m *model) acquire(ids []blocks.ID) {
	if len(ids) == 0 {
		return
	}
	m.clock++
	for _, id := range ids {
		m.entries[m.byID[id]].lastAccess = m.clock
		m.holders[id]++
	}
}

func (m *model) release(ids []blocks.ID) {
	for i := len(ids) - 1; i >= 0; i-- {
		k, ok := m.byID[ids[i]]
		if !ok {
			continue
		}
		m.clock++
		m.entries[k].lastAccess = m.clock
		m.holders[ids[i]]--
	}
}

// commit mirrors Index.Commit for blocks start.. of p; detached reports and sets whether
// the sequence lost its place.
func (m *model) commit(p *Prompt, start int, ids []blocks.ID, detached *bool) CommitResult {
	var res CommitResult
	if len(ids) == 0 {
		return res
	}
	if *detached || (start > 0 && m.entries[m.key(p, start)] == nil) {
		*detached = true
		res.Orphaned = len(ids)
		return res
	}
	m.clock++
	for i, id := range ids {
		k := m.key(p, start+i+1)
		if e, ok := m.entries[k]; ok {
			if e.id == id {
				res.Present++
			} else {
				res.Duplicates++
			}
			e.lastAccess = m.clock
			continue
		}
		parent := m.key(p, start+i)
		if parent != "" {
			m.entries[parent].children++
		}
		m.entries[k] = &mentry{id: id, parent: parent, lastAccess: m.clock}
		m.byID[id] = k
		m.holders[id] = 1 // the committing request's own reference (no forks here)
		res.Stored++
	}
	return res
}

// victim is the unreferenced leaf with the oldest last access, ties by block ID.
func (m *model) victim() (string, bool) {
	best, found := "", false
	for k, e := range m.entries {
		if e.children != 0 || m.holders[e.id] != 0 {
			continue
		}
		if !found || e.lastAccess < m.entries[best].lastAccess ||
			(e.lastAccess == m.entries[best].lastAccess && e.id < m.entries[best].id) {
			best, found = k, true
		}
	}
	return best, found
}

// remove takes entry k out of the model (its parent loses a child) and returns its block.
func (m *model) remove(k string) blocks.ID {
	e := m.entries[k]
	if e.parent != "" {
		m.entries[e.parent].children--
	}
	delete(m.entries, k)
	delete(m.byID, e.id)
	delete(m.holders, e.id)
	return e.id
}

// evict removes up to n victims and returns their blocks in order.
func (m *model) evict(n int) []blocks.ID {
	var out []blocks.ID
	for len(out) < n {
		k, ok := m.victim()
		if !ok {
			break
		}
		out = append(out, m.remove(k))
	}
	return out
}

// reclaimable counts cached blocks with no held block at or below them.
func (m *model) reclaimable() int {
	pinned := map[string]bool{}
	for k, e := range m.entries {
		if m.holders[e.id] == 0 {
			continue
		}
		for ; k != "" && !pinned[k]; k = m.entries[k].parent {
			pinned[k] = true
		}
	}
	return len(m.entries) - len(pinned)
}

func (m *model) held() int {
	n := 0
	for _, h := range m.holders {
		if h > 0 {
			n++
		}
	}
	return n
}

func (m *model) reset() {
	m.entries = map[string]*mentry{}
	m.byID = map[blocks.ID]string{}
	m.holders = map[blocks.ID]int{}
}

// hasNamespace reports whether any cached block belongs to ns.
func (m *model) hasNamespace(ns Namespace) bool {
	prefix := ns.LoRA + "\x00" + ns.Salt + "\x00"
	for k := range m.entries {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

func (m *model) cachedIDs() []blocks.ID {
	var out []blocks.ID
	for id := range m.byID {
		out = append(out, id)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// dropBlocks mirrors Index.EvictBlocks: the cached blocks of ids and every entry below
// one of them leave, deepest first, ties by block ID, and it returns them in that order.
func (m *model) dropBlocks(ids []blocks.ID) []blocks.ID {
	doomed := map[string]bool{}
	for _, id := range ids {
		if k, ok := m.byID[id]; ok {
			doomed[k] = true
		}
	}
	depth := func(k string) int {
		d := 0
		for ; k != ""; k = m.entries[k].parent {
			d++
		}
		return d
	}
	var keys []string
	for k := range m.entries {
		for a := k; a != ""; a = m.entries[a].parent {
			if doomed[a] {
				keys = append(keys, k)
				break
			}
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if di, dj := depth(keys[i]), depth(keys[j]); di != dj {
			return di > dj
		}
		return m.entries[keys[i]].id < m.entries[keys[j]].id
	})
	var out []blocks.ID
	for _, k := range keys {
		out = append(out, m.remove(k))
	}
	return out
}
