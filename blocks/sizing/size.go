package sizing

import (
	"math"
	"math/big"
	"strconv"
	"strings"
)

// ParseSize reads a token count the way vLLM reads --max-model-len and its other
// human-readable integers, so a value copied from a vLLM command line means the same here:
//
//   - a plain integer: "32768", "+8", "1_000" (Python's int() rules: sign, underscores
//     between digits);
//   - a number with a decimal suffix k, m, g, t (x 10^3, 10^6, 10^9, 10^12), decimals
//     allowed: "32k" is 32,000 and "25.6k" is 25,600;
//   - an integer with a binary suffix K, M, G, T (x 2^10, 2^20, 2^30, 2^40): "32K" is
//     32,768; "2.5K" is refused, as vLLM refuses it.
//
// Surrounding white space is ignored. Like vLLM, a decimal suffix multiplies a float64
// and truncates, so "1.005k" gives 1,004, the number vLLM would use. Unlike vLLM, a
// negative value is an error (vLLM's -1 for "auto" is for the caller to handle), as is a
// value beyond int64. Errors wrap ErrBadSize.
func ParseSize(s string) (int64, error) {
	v := strings.TrimSpace(s)
	if v == "" {
		return 0, &SizeError{Input: s, Reason: "empty"}
	}
	if num, suffix, ok := splitSuffix(v); ok {
		return parseSuffixed(s, num, suffix)
	}
	n, ok, overflow := parsePythonInt(v)
	if !ok {
		return 0, &SizeError{Input: s, Reason: "not an integer, nor a number with one of the suffixes k, m, g, t (x1000) or K, M, G, T (x1024)"}
	}
	if err := checkSize(s, n, overflow); err != nil {
		return 0, err
	}
	return n, nil
}

func checkSize(input string, n int64, overflow bool) error {
	if overflow {
		return &SizeError{Input: input, Reason: "too large"}
	}
	if n < 0 {
		return &SizeError{Input: input, Reason: "must not be negative"}
	}
	return nil
}

// splitSuffix matches vLLM's pattern (\d+(?:\.\d+)?)([kKmMgGtT]) against the whole of v.
func splitSuffix(v string) (num string, suffix byte, ok bool) {
	if len(v) < 2 {
		return "", 0, false
	}
	suffix = v[len(v)-1]
	if strings.IndexByte("kKmMgGtT", suffix) < 0 {
		return "", 0, false
	}
	num = v[:len(v)-1]
	intPart, frac, hasDot := strings.Cut(num, ".")
	if !allDigits(intPart) || (hasDot && !allDigits(frac)) {
		return "", 0, false
	}
	return num, suffix, true
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func parseSuffixed(input, num string, suffix byte) (int64, error) {
	switch suffix {
	case 'k', 'm', 'g', 't':
		mult := map[byte]float64{'k': 1e3, 'm': 1e6, 'g': 1e9, 't': 1e12}[suffix]
		f, err := strconv.ParseFloat(num, 64)
		r := math.Trunc(f * mult)
		if err != nil || r >= math.MaxInt64 {
			return 0, checkSize(input, 0, true)
		}
		return int64(r), nil
	default:
		if strings.Contains(num, ".") {
			return 0, &SizeError{Input: input, Reason: "decimals are not allowed with the binary suffix " + string(suffix) + "; did you mean " + num + string(suffix+'a'-'A') + "?"}
		}
		shift := map[byte]uint{'K': 10, 'M': 20, 'G': 30, 'T': 40}[suffix]
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil || n > math.MaxInt64>>shift {
			return 0, checkSize(input, 0, true)
		}
		return n << shift, nil
	}
}

// parsePythonInt reads an integer as Python's int() reads a string: an optional sign, then
// decimal digits with single underscores allowed between them. overflow reports a value
// beyond int64 (n then only carries the sign).
func parsePythonInt(v string) (n int64, ok, overflow bool) {
	neg := false
	if v[0] == '+' || v[0] == '-' {
		neg = v[0] == '-'
		v = v[1:]
	}
	if v == "" || v[0] == '_' || v[len(v)-1] == '_' || strings.Contains(v, "__") {
		return 0, false, false
	}
	digits := strings.ReplaceAll(v, "_", "")
	if !allDigits(digits) {
		return 0, false, false
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil { // only a range error is possible once the digits are checked
		if neg {
			return -1, true, false // negative: refused as such, whatever its size
		}
		return 0, true, true
	}
	if neg {
		n = -n
	}
	return n, true, false
}

// MaxBytes bounds ParseBytes: 2^56 bytes (64 PiB), beyond any GPU or model.
const MaxBytes = 1 << 56

// byteUnits maps a unit, lower-cased, to its multiplier. Decimal units are SI (a GB is
// 10^9 bytes, as disk and GPU vendors count: an "80 GB" H100); binary ones carry an i
// (a GiB is 2^30, as nvidia-smi and vLLM's logs count).
var byteUnits = map[string]int64{
	"": 1, "b": 1,
	"k": 1e3, "kb": 1e3, "m": 1e6, "mb": 1e6, "g": 1e9, "gb": 1e9, "t": 1e12, "tb": 1e12,
	"ki": 1 << 10, "kib": 1 << 10, "mi": 1 << 20, "mib": 1 << 20, "gi": 1 << 30, "gib": 1 << 30, "ti": 1 << 40, "tib": 1 << 40,
}

// ParseBytes reads a byte size: a non-negative decimal number ("80", "0.05", no
// exponent) and an optional unit, letters in any case, space allowed before it:
//
//   - B or none: bytes;
//   - k, kB, M, MB, G, GB, T, TB: 10^3, 10^6, 10^9, 10^12 (80GB and 80G are
//     80,000,000,000);
//   - KiB, MiB, GiB, TiB (or Ki, Mi, Gi, Ti): 2^10, 2^20, 2^30, 2^40 (80GiB is
//     85,899,345,920).
//
// For bytes K is 1000, as for every decimal unit; token counts (ParseSize) follow vLLM,
// where K is 1024. The value is exact (0.05MB is 50,000), rounded down to a whole byte,
// and at most MaxBytes. Errors wrap ErrBadSize.
func ParseBytes(s string) (int64, error) {
	v := strings.TrimSpace(s)
	i := 0
	for i < len(v) && (v[i] >= '0' && v[i] <= '9' || v[i] == '.') {
		i++
	}
	num, unit := v[:i], strings.ToLower(strings.TrimSpace(v[i:]))
	mult, ok := byteUnits[unit]
	intPart, frac, _ := strings.Cut(num, ".")
	if !ok || num == "" || strings.Count(num, ".") > 1 || (intPart == "" && frac == "") {
		return 0, &SizeError{Input: s, Reason: "not a byte size: want a number and a unit such as 80GB (10^9 bytes) or 80GiB (2^30 bytes)"}
	}
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return 0, &SizeError{Input: s, Reason: "not a number"}
	}
	r.Mul(r, new(big.Rat).SetInt64(mult))
	n := new(big.Int).Quo(r.Num(), r.Denom())
	if !n.IsInt64() || n.Int64() > MaxBytes {
		return 0, &SizeError{Input: s, Reason: "too large: at most 64 PiB"}
	}
	return n.Int64(), nil
}
