package redisindex

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A NOSCRIPT answer exec cannot read back into a call of its own scripts (another
// script's SHA-1, arguments of another shape) is a refusal by Redis, typed as the others.
func TestEvalShaCallRefusalsAreTyped(t *testing.T) {
	sha := pruneRequestScript.Hash()
	for _, args := range [][]any{
		{"evalsha", sha},
		{"evalsha", "0123456789abcdef0123456789abcdef01234567", 1, "k"},
		{"evalsha", sha, 2, "k"},
		{"evalsha", sha, 1, 7},
	} {
		_, _, err := evalShaCall(args)
		require.ErrorIs(t, err, ErrRefused, "%v", args)
	}
	s, keys, err := evalShaCall([]any{"evalsha", sha, 1, "k"})
	require.NoError(t, err)
	require.Same(t, pruneRequestScript, s)
	require.Equal(t, []string{"k"}, keys)
}
