package kvevents_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/prefix/kvevents"
)

// An extra key whose header declares far more entries than the payload holds is refused
// as malformed before anything is built for it (the library alone would allocate for the
// declared length).
func TestDecodeRefusesExtraKeyLongerThanPayload(t *testing.T) {
	for name, header := range map[string]string{
		"map32":   "\xdf\x0a\x30\x30\x30" + "000",
		"array32": "\xdd\x0a\x30\x30\x30" + "000",
	} {
		t.Run(name, func(t *testing.T) {
			// [ts, [[BlockStored, hashes, parent, tokens, bs, lora_id, medium, lora_name, extra_keys]], dp]
			p := []byte("\x93\xcb\x3f\xf0\x00\x00\x00\x00\x00\x00\x91\x99\xabBlockStored\x91\x01\xc0\x90\x10\xc0\xc0\xc0" +
				"\x91\x91" + header)
			var d kvevents.Decoder
			var b kvevents.Batch
			err := d.Decode(p, &b)
			require.Error(t, err)
			require.True(t, errors.Is(err, kvevents.ErrMalformed), err)
			require.Contains(t, err.Error(), "in 3 bytes")
		})
	}
}
