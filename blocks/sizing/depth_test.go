package sizing

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// validWith is a valid config with an unknown field "x" whose value is v.
func validWith(v string) string {
	return `{"num_hidden_layers": 2, "num_attention_heads": 4, "head_dim": 64, "x": ` + v + `}`
}

// nested is n levels of arrays around 0 (n objects when obj).
func nested(n int, obj bool) string {
	if obj {
		return strings.Repeat(`{"a":`, n) + "0" + strings.Repeat("}", n)
	}
	return strings.Repeat("[", n) + "0" + strings.Repeat("]", n)
}

// Nesting is bounded by MaxConfigDepth before decoding: a config one level deeper is
// refused with ErrConfigTooDeep (an ErrBadConfig), where encoding/json alone accepted
// 10,000 levels. Brackets inside strings, escaped quotes among them, do not count.
func TestParseHFConfigBoundsDepth(t *testing.T) {
	for _, tc := range []struct {
		name string
		json string
		deep bool // refused as too deep
	}{
		{"arrays at MaxConfigDepth", validWith(nested(MaxConfigDepth-1, false)), false},
		{"objects at MaxConfigDepth", validWith(nested(MaxConfigDepth-1, true)), false},
		{"arrays past MaxConfigDepth", validWith(nested(MaxConfigDepth, false)), true},
		{"objects past MaxConfigDepth", validWith(nested(MaxConfigDepth, true)), true},
		{"9,000 levels, under encoding/json's limit", validWith(nested(9000, false)), true},
		{"brackets in a string", validWith(`"` + strings.Repeat("[{", 5000) + `"`), false},
		{"brackets after an escaped quote", validWith(`"\"` + strings.Repeat("[", 5000) + `\\"`), false},
		{"escaped backslash ends the string", validWith(`["\\", ` + nested(MaxConfigDepth, false) + `]`), true},
		{"stray closing brackets do not buy depth", `]]]]]]]]` + validWith(nested(MaxConfigDepth, false)), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseHFConfig([]byte(tc.json))
			if tc.deep {
				require.ErrorIs(t, err, ErrConfigTooDeep)
				require.ErrorIs(t, err, ErrBadConfig)
				return
			}
			require.NoError(t, err)
		})
	}
}

// The depth scan of an accepted config allocates nothing.
func TestCheckDepthDoesNotAllocate(t *testing.T) {
	data := []byte(validWith(nested(MaxConfigDepth-1, true)))
	require.Zero(t, testing.AllocsPerRun(10, func() { _ = checkDepth(data) }))
}
