package main

import (
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/kvpage/kvpage/prefix"
	"github.com/kvpage/kvpage/prefix/vllmhash"
)

func init() {
	register(command{name: "hash", summary: "vLLM's sha256_cbor block hashes of a token sequence", run: runHash})
}

const hashHelp = `usage: kvpage hash --block-size B [--seed S] [--salt X] [--lora NAME] [--int64] TOKEN...

Prints the block hash of each full block of the tokens, one per line, as vLLM computes it
with --prefix-caching-hash-algo sha256_cbor: lowercase hex, or with --int64 the 64-bit
form (the last 8 bytes, unsigned decimal) that vLLM publishes when
VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1. Without --seed the hashes are those of a server
started without PYTHONHASHSEED, rooted at vLLM's fixed default seed "vllm-none-hash"
(DEFAULT_NONE_HASH_SEED); --seed S gives those of PYTHONHASHSEED=S (an empty S is a seed
of its own). vLLM releases older than that default drew the root at random when
PYTHONHASHSEED was unset: no tool can reproduce those. A partial last block has no hash. Compare the
output with what a router or a server reports: a different seed or block size gives
different hashes, and routing then fails silently.
Tokens are non-negative integers, as arguments or comma-separated.
Exit status: 0 on success, 2 for a bad flag or token.

`

func runHash(args []string, stdout, stderr io.Writer) error {
	f := newFlagSet("hash", hashHelp)
	fs := f.fs
	seed := fs.String("seed", "", "PYTHONHASHSEED of the vLLM servers; unset: vLLM's default seed \"vllm-none-hash\"")
	blockSize := fs.Int("block-size", 0, "tokens per block, as vLLM's --block-size (required)")
	salt := fs.String("salt", "", "cache_salt of the request: an extra key of the first block")
	lora := fs.String("lora", "", "LoRA adapter name of the request: an extra key of every block")
	int64Form := fs.Bool("int64", false, "print the 64-bit form in unsigned decimal instead of hex")
	// Tokens follow the flags: parse the flags, then take the arguments as tokens.
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			f.printHelp(stdout)
			return errHelp
		}
		return &usageError{msg: f.rewrite(err.Error())}
	}
	fs.Visit(func(fl *flag.Flag) { f.set[fl.Name] = true })
	if *blockSize <= 0 || *blockSize > maxBlockSize {
		return badFlag("--block-size must be between 1 and %d tokens, got %d", maxBlockSize, *blockSize)
	}
	tokens, err := parseTokens(fs.Args())
	if err != nil {
		return err
	}
	p := &prefix.Prompt{Namespace: prefix.Namespace{LoRA: *lora, Salt: *salt}, Tokens: tokens}
	// --seed stands for PYTHONHASHSEED: given, even empty, it is the seed; absent, vLLM's default.
	hashes := vllmhash.PromptHashes(vllmhash.NewSHA256CBOR(vllmhash.ResolveSeed(*seed, f.set["seed"])), p, *blockSize)
	for _, h := range hashes {
		if *int64Form {
			fmt.Fprintln(stdout, vllmhash.Uint64(h))
		} else {
			fmt.Fprintln(stdout, hex.EncodeToString(h))
		}
	}
	if len(hashes) == 0 {
		fmt.Fprintf(stderr, "kvpage hash: no full block: %d tokens, blocks of %d\n", len(tokens), *blockSize)
	}
	return nil
}

// parseTokens reads token ids from arguments, each one or several separated by commas.
func parseTokens(args []string) ([]int32, error) {
	var out []int32
	for _, arg := range args {
		for _, f := range strings.Split(arg, ",") {
			f = strings.TrimSpace(f)
			if f == "" {
				continue
			}
			v, err := strconv.ParseInt(f, 10, 64)
			if err != nil || v < 0 || v > math.MaxInt32 {
				return nil, badFlag("bad token %q: token ids are integers from 0 to %d", f, math.MaxInt32)
			}
			out = append(out, int32(v))
		}
	}
	return out, nil
}
