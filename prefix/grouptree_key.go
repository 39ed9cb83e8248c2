package prefix

// unitKey chains a unit of tokens onto its parent's key. It only picks table slots:
// equality is always decided on the tokens and the parent. The tokens are folded in
// pairs, NH-style ((t[i]+k[i]) * (t[i+1]+k[i+1]) summed), so the multiplies are
// independent of one another rather than one dependent chain, then mixed once.
func unitKey(parent uint64, toks []int32) uint64 {
	var sum uint64
	i := 0
	if len(toks) == 16 { // the usual unit, unrolled
		t := (*[16]int32)(toks)
		sum = (uint64(uint32(t[0]))+0x243F6A88)*(uint64(uint32(t[1]))+0x85A308D3) +
			(uint64(uint32(t[2]))+0x13198A2E)*(uint64(uint32(t[3]))+0x03707344) +
			(uint64(uint32(t[4]))+0xA4093822)*(uint64(uint32(t[5]))+0x299F31D0) +
			(uint64(uint32(t[6]))+0x082EFA98)*(uint64(uint32(t[7]))+0xEC4E6C89) +
			(uint64(uint32(t[8]))+0x452821E6)*(uint64(uint32(t[9]))+0x38D01377) +
			(uint64(uint32(t[10]))+0xBE5466CF)*(uint64(uint32(t[11]))+0x34E90C6C) +
			(uint64(uint32(t[12]))+0xC0AC29B7)*(uint64(uint32(t[13]))+0xC97C50DD) +
			(uint64(uint32(t[14]))+0x3F84D5B5)*(uint64(uint32(t[15]))+0xB5470917)
		i = 16
	}
	for ; i+1 < len(toks); i += 2 {
		k := nhKeys[(i/2)&(len(nhKeys)-1)]
		sum += (uint64(uint32(toks[i])) + k[0]) * (uint64(uint32(toks[i+1])) + k[1])
	}
	if i < len(toks) {
		sum += (uint64(uint32(toks[i])) + 0x9E3779B9) * 0xC2B2AE3D27D4EB4F
	}
	h := sum ^ (parent * 0x9E3779B97F4A7C15) ^ uint64(len(toks))
	h ^= h >> 33
	h *= 0xFF51AFD7ED558CCD
	h ^= h >> 33
	h *= 0xC4CEB9FE1A85EC53
	return h ^ h>>33
}

// nhKeys are fixed odd 32-bit constants for unitKey's pairs (the fractional digits of
// pi), repeated for units longer than 32 tokens.
var nhKeys = [16][2]uint64{
	{0x243F6A88, 0x85A308D3}, {0x13198A2E, 0x03707344}, {0xA4093822, 0x299F31D0}, {0x082EFA98, 0xEC4E6C89},
	{0x452821E6, 0x38D01377}, {0xBE5466CF, 0x34E90C6C}, {0xC0AC29B7, 0xC97C50DD}, {0x3F84D5B5, 0xB5470917},
	{0x9216D5D9, 0x8979FB1B}, {0xD1310BA6, 0x98DFB5AC}, {0x2FFD72DB, 0xD01ADFB7}, {0xB8E1AFED, 0x6A267E96},
	{0xBA7C9045, 0xF12C7F99}, {0x24A19947, 0xB3916CF7}, {0x0801F2E2, 0x858EFC16}, {0x636920D8, 0x71574E69},
}
