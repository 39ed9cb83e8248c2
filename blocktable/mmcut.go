package blocktable

import (
	"strconv"

	"github.com/kvpage/kvpage/prefix"
)

// AppendInputs appends seq's multimodal inputs (Request.MM) to dst and returns the
// extended slice: the inputs the Manager keys its blocks by, the admission's as Truncate
// cut them. With AppendTokens, it is what a recompute-mode readmission of seq passes as
// Request.MM. They are a copy, the caller's to change or keep; the Manager's own list is
// not handed out, since a write to it would change the keys of blocks still to be
// committed. A dst with room allocates nothing. For an unknown seq it returns dst and
// ErrUnknownSeq (in a *SeqError).
func (m *Manager) AppendInputs(dst []prefix.MMInput, seq SeqID) ([]prefix.MMInput, error) {
	s, err := m.lookup("inputs", seq)
	if err != nil {
		return dst, err
	}
	return append(dst, s.prompt.MM...), nil
}

// ownMM copies src into dst's buffer and returns it: a sequence's inputs live in its
// record's own buffer, so that no caller's slice and no other record's keys its blocks.
// src may be dst itself. Entries past the copy are cleared, so that the buffer keeps no
// hash strings alive. A text prompt (no inputs) copies nothing; an input list no longer
// than the record's last allocates nothing.
func ownMM(dst, src []prefix.MMInput) []prefix.MMInput {
	if len(src) == 0 && len(dst) == 0 {
		return dst // text: no copy call (MMInput holds a string: a copy is typedslicecopy's)
	}
	n := len(dst)
	dst = append(dst[:0], src...)
	if n > len(dst) {
		clear(dst[len(dst):n])
	}
	return dst
}

// mmUpTo is mm cut to the first n tokens of a sequence in blocks of bs tokens: inputs that
// start at or past n dropped, one across n ending at n. Truncate cuts a sequence's inputs
// with it. Resume cuts those of a chunked prefill's rest, past the tokens, for its Admit
// alone, which refuses them (ErrInvalidArgument); the resumed sequence then takes its
// whole inputs back, since the tokens appended next are that prompt's.
//
// The index keys an input by its hash alone (and, in one form, where it starts), so an
// input cut short would key the block the cut falls in exactly as the whole input keys it
// whenever the tokens appended past n are its placeholders again: a block whose tokens
// past n are text would match the whole image's block, another image's KV. So the part of
// a cut input inside that block is renamed by cutHash; its part before that block keeps
// the hash, so that the blocks before the cut keep their keys. A cut on a block boundary
// leaves no part of the input in the block the cut falls in, and renames nothing. It
// copies only when something is cut.
func mmUpTo(mm []prefix.MMInput, n, bs int) []prefix.MMInput {
	if mmWithin(mm, n) {
		return mm
	}
	var out []prefix.MMInput
	at := n - n%bs // the first token of the block the cut falls in
	for _, in := range mm {
		if in.Offset >= n {
			break
		}
		if in.Length <= n-in.Offset || at == n {
			in.Length = min(in.Length, n-in.Offset)
			out = append(out, in)
			continue
		}
		if in.Offset < at {
			out = append(out, prefix.MMInput{Hash: in.Hash, Offset: in.Offset, Length: at - in.Offset})
		}
		from := max(in.Offset, at)
		out = append(out, prefix.MMInput{Hash: cutHash(in.Hash, n-in.Offset), Offset: from, Length: n - from})
	}
	return out
}

// cutHash names an input cut to its first k tokens: the same for every sequence cut
// there, so that they still share the block, and a name no whole input has as long as
// hashes are printable digests (vLLM's mm_hash is hex), which hold no NUL byte.
func cutHash(h string, k int) string {
	return h + "\x00cut" + strconv.Itoa(k)
}
