package prefix

// ghostTable remembers recently evicted blocks by their chained key, so that a lookup that
// misses can say whether the block it wanted was evicted (and by what) or never stored.
// It is direct-mapped and fixed at New: a slot holds one key and a stamp (logical time << 8
// | cause), and a later eviction whose key maps to the same slot overwrites it. A record
// can therefore be forgotten (the miss then reads as never stored), never invented: a key
// is reported evicted only if that very key was. Recording costs one store per evicted
// block and nothing when the history is off (slots is nil).
type ghostTable struct {
	keys   []uint64
	stamps []uint64 // 0 = empty
	mask   uint64
}

// init sizes the table for at least n records, rounded up to a power of two.
func (g *ghostTable) init(n int) {
	if n <= 0 {
		return
	}
	size := 1
	for size < n {
		size <<= 1
	}
	g.keys = make([]uint64, size)
	g.stamps = make([]uint64, size)
	g.mask = uint64(size - 1)
}

func (g *ghostTable) on() bool { return g.keys != nil }

// slot spreads keys (already well mixed, but maybe masked by tests) over the table.
func (g *ghostTable) slot(key uint64) uint64 { return (key ^ key>>29) & g.mask }

func (g *ghostTable) record(key, at uint64, cause EvictCause) {
	i := g.slot(key)
	g.keys[i] = key
	g.stamps[i] = at<<8 | uint64(cause)
}

// find returns the cause and time of key's last recorded eviction, or EvictNone.
func (g *ghostTable) find(key uint64) (EvictCause, uint64) {
	if g.keys == nil {
		return EvictNone, 0
	}
	i := g.slot(key)
	if s := g.stamps[i]; s != 0 && g.keys[i] == key {
		return EvictCause(s & 0xff), s >> 8
	}
	return EvictNone, 0
}

// WithEvictionHistory keeps a record of about n recently evicted blocks (16 bytes each,
// allocated at New), so that Explain can tell a block that was evicted, and by what, from
// one that was never stored. Without it Explain reports MissNeverStored for both. n = 0
// turns it off; a server that wants explanations typically passes the pool's capacity.
// New refuses n outside [0, MaxEvictionHistory] with a *SizeError.
func WithEvictionHistory(n int) Option { return func(c *config) { c.history = n } }

// MaxEvictionHistory is the largest eviction history New accepts: 2^26 records, 1 GiB.
const MaxEvictionHistory = 1 << 26
