package cluster_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/prefix"
	"github.com/kvpage/kvpage/prefix/cluster"
	"github.com/kvpage/kvpage/prefix/vllmhash"
)

// gatedHasher is vLLM's hasher that, once armed, stops in its next Block until released:
// a lookup caught in the middle of hashing its prompt.
type gatedHasher struct {
	*vllmhash.SHA256CBOR
	armed   bool
	inBlock chan struct{}
	release chan struct{}
}

func (h *gatedHasher) Block(dst, parent []byte, tokens []int32, e prefix.Extra) {
	if h.armed {
		h.armed = false
		close(h.inBlock)
		<-h.release
	}
	h.SHA256CBOR.Block(dst, parent, tokens, e)
}

// A lookup hashes its prompt without the index's lock: an Apply completes while a Route is
// stopped inside the hasher, and the Route then sees that Apply's blocks, as it hashes
// first and looks up after. (When Route hashed under the lock, this Apply waited for it:
// the deadline below is only there to fail instead of hanging.)
func TestRouteHashesOutsideTheLock(t *testing.T) {
	h := &gatedHasher{SHA256CBOR: vllmhash.NewSHA256CBOR("42"), inBlock: make(chan struct{}), release: make(chan struct{})}
	c, err := cluster.NewClusterIndex(h, 4)
	require.NoError(t, err)
	p := prompt(prefix.Namespace{}, 0, 32)
	require.NoError(t, c.Apply("a", storeChain(t, "42", p, 4, 0, 3)))
	batch := storeChain(t, "42", p, 4, 0, 8)

	h.armed = true
	type route struct {
		server string
		blocks int
	}
	done := make(chan route)
	go func() {
		s, n, _ := c.Route(p)
		done <- route{s, n}
	}()
	<-h.inBlock
	applied := make(chan error)
	go func() { applied <- c.Apply("b", batch) }()
	select {
	case err := <-applied:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		close(h.release)
		t.Fatal("Apply waited for a Route's hashing")
	}
	close(h.release)
	require.Equal(t, route{"b", 8}, <-done)
}

// Concurrent Applies and lookups (run with -race): server a's prompt never changes, server
// b stores and removes a shorter prefix of it over and over, and every lookup sees a with
// all its blocks and b with none or all of its own.
func TestConcurrentApplyAndRoute(t *testing.T) {
	c := newIndex(t, "42", 4)
	p := prompt(prefix.Namespace{Salt: "s"}, 0, 64)
	p.MM = []prefix.MMInput{{Hash: "img", Offset: 6, Length: 10}}
	require.NoError(t, c.Apply("a", storeChain(t, "42", p, 4, 0, 16)))
	store := storeChain(t, "42", p, 4, 0, 8)
	hs := vllmhash.PromptHashes(vllmhash.NewSHA256CBOR("42"), p, 4)
	remove := removeBlocks(t, hs[:8]...)

	const rounds = 200
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range rounds {
			if err := c.Apply("b", store); err != nil {
				t.Error(err)
				return
			}
			if err := c.Apply("b", remove); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hits := make([]cluster.ServerHit, 0, 2)
			for range rounds {
				if g == 0 {
					s, n, ok := c.Route(p)
					if !ok || s != "a" || n != 16 {
						t.Errorf("Route = %q, %d, %v; want a, 16", s, n, ok)
						return
					}
					continue
				}
				hits, _ = c.Match(hits[:0], p)
				if len(hits) == 0 || hits[0] != (cluster.ServerHit{Server: "a", Blocks: 16}) {
					t.Errorf("Match = %v", hits)
					return
				}
				if len(hits) == 2 && hits[1].Blocks != 0 && hits[1].Blocks != 8 {
					t.Errorf("b holds %d blocks, want 0 or 8", hits[1].Blocks)
					return
				}
			}
		}()
	}
	wg.Wait()
	require.NoError(t, c.CheckInvariants())
}
