package kvtest_test

import (
	"testing"

	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/blocktable/kvtest"
	"github.com/kvpage/kvpage/prefix"
	"github.com/stretchr/testify/require"
)

func TestEnvExpectMiss(t *testing.T) {
	env := kvtest.New(t, kvtest.Config{})
	id := env.Seq("a")
	req := &blocktable.Request{Prompt: kvtest.MustTokens("0..12")}
	env.ExpectMiss(req, prefix.MissNeverStored)
	_, err := env.Manager.Admit(id, req)
	require.NoError(t, err)
	require.NoError(t, env.Manager.Finish(id))
	require.Equal(t, 3, env.ExpectMiss(req, prefix.MissNone).MatchedBlocks)
	env.Index.Evict(3)
	x := env.ExpectMiss(req, prefix.MissEvicted)
	require.Equal(t, prefix.EvictPolicy, x.Evicted)
}
