package blocks

// Option configures a Pool.
type Option func(*Pool)

// WithNullBlock reserves block 0 as the null block, as vLLM does: it is never handed out,
// never freed and left out of usage, so a pool of n blocks has n-1 usable blocks.
func WithNullBlock() Option { return func(p *Pool) { p.hasNull = true } }
