package kvtest

import (
	"fmt"
	"strconv"
	"strings"
)

// maxTokens bounds a token list written in a scenario, so that a malformed or fuzzed
// script cannot ask for gigabytes.
const maxTokens = 1 << 14

// ParseTokens reads a token list as scenarios write it: comma-separated items, each a
// token id ("7"), an inclusive ascending range ("0..47") or a repetition ("5*16": token 5
// sixteen times). "0..15,100..103,7" is 21 tokens.
func ParseTokens(spec string) ([]int32, error) {
	var out []int32
	for _, item := range strings.Split(spec, ",") {
		var lo, hi, rep int64
		var err error
		switch {
		case strings.Contains(item, ".."):
			a, b, _ := strings.Cut(item, "..")
			if lo, err = parseToken(a); err == nil {
				hi, err = parseToken(b)
			}
			if err == nil && hi < lo {
				err = fmt.Errorf("range %q runs backwards", item)
			}
			rep = 1
		case strings.Contains(item, "*"):
			a, b, _ := strings.Cut(item, "*")
			if lo, err = parseToken(a); err == nil {
				rep, err = strconv.ParseInt(b, 10, 32)
			}
			if err == nil && (rep < 0 || rep > maxTokens) {
				err = fmt.Errorf("repetition out of range in %q", item)
			}
			hi = lo
		default:
			lo, err = parseToken(item)
			hi, rep = lo, 1
		}
		if err != nil {
			return nil, fmt.Errorf("tokens %q: %w", spec, err)
		}
		if int64(len(out))+(hi-lo+1)*rep > maxTokens {
			return nil, fmt.Errorf("tokens %q: more than %d tokens", spec, maxTokens)
		}
		for range rep {
			for t := lo; t <= hi; t++ {
				out = append(out, int32(t))
			}
		}
	}
	return out, nil
}

func parseToken(s string) (int64, error) {
	v, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("bad token %q", s)
	}
	return v, nil
}

// MustTokens is ParseTokens for literals in tests: it panics on a malformed spec.
func MustTokens(spec string) []int32 {
	t, err := ParseTokens(spec)
	if err != nil {
		panic(err)
	}
	return t
}

// FormatTokens writes toks as ParseTokens reads them, runs of consecutive ascending ids
// as a..b.
func FormatTokens(toks []int32) string {
	var b strings.Builder
	for i := 0; i < len(toks); {
		j := i
		for j+1 < len(toks) && toks[j+1] == toks[j]+1 {
			j++
		}
		if i > 0 {
			b.WriteByte(',')
		}
		if j > i {
			fmt.Fprintf(&b, "%d..%d", toks[i], toks[j])
		} else {
			fmt.Fprintf(&b, "%d", toks[i])
		}
		i = j + 1
	}
	return b.String()
}
