package main

import (
	"fmt"
	"io"

	"github.com/kvpage/kvpage/blocks"
)

func init() {
	register(command{name: "demo", summary: "a walk through the block pool: allocate, share, run out, double free", run: runDemo})
}

const demoHelp = `usage: kvpage demo [--blocks N]

Walks through package blocks' pool in a few lines: a pool with vLLM's null block, a request
allocating blocks, a second request sharing two of them (refcounts), an allocation beyond
what is free failing without changing anything, and a double free caught as an error.
Every line prints what the library returned.

`

func runDemo(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("demo", demoHelp)
	n := fs.fs.Int("blocks", 8, "number of physical blocks, null block included, 5 to 1,000,000")
	if err := fs.parse(args, stdout); err != nil {
		return err
	}
	if *n < 5 || *n > 1_000_000 {
		return badFlag("--blocks must be between 5 and 1,000,000, got %d", *n)
	}
	pool, err := blocks.New(*n, blocks.WithNullBlock())
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "pool of %d blocks, %d usable (block 0 is the null block)\n", pool.NumBlocks(), pool.Capacity())
	a, err := pool.Allocate(nil, 3)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "request A allocates 3 blocks: %v\n", a)
	if err := pool.Retain(a[:2]...); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "request B shares A's first 2 blocks: refcounts %d %d %d\n", pool.RefCount(a[0]), pool.RefCount(a[1]), pool.RefCount(a[2]))
	if _, err := pool.Allocate(nil, pool.NumFree()+1); err != nil {
		fmt.Fprintf(stdout, "asking for one block more than is free fails and changes nothing: %v\n", err)
	}
	if err := pool.Release(a...); err != nil {
		return err
	}
	s := pool.Stats()
	fmt.Fprintf(stdout, "A finishes: %d free, %d in use (B still holds 2)\n", s.Free, s.InUse)
	if err := pool.Release(a[2]); err != nil {
		fmt.Fprintf(stdout, "releasing A's last block again is a double free: %v\n", err)
	}
	return pool.CheckInvariants()
}
