package kvtest

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// rewrite is the -kvtest.rewrite flag. Like net/http/httptest's -httptest.serve, it is
// registered only when it appears on the command line, so that the kit adds no flag to
// test binaries that do not use it.
var rewrite bool

func init() {
	for _, a := range os.Args[1:] {
		if a == "-kvtest.rewrite" || a == "--kvtest.rewrite" || strings.HasPrefix(a, "-kvtest.rewrite=") || strings.HasPrefix(a, "--kvtest.rewrite=") {
			flag.BoolVar(&rewrite, "kvtest.rewrite", false, "rewrite the expected output of kvtest scenario files instead of checking it")
			return
		}
	}
}

// Rewriting reports whether the test binary runs with -kvtest.rewrite: scenario files are
// then rewritten with the actual output instead of checked against it.
func Rewriting() bool { return rewrite }

// A scenario file is a sequence of directives, in the spirit of pebble's data-driven
// tests. A directive is one command line followed by a line "----" and its expected
// output, which ends at the first blank line; "expect" directives carry their expectation
// on the command line itself and have no output block. Lines starting with # and blank
// lines between directives are comments, kept as they are when the file is rewritten.

// directive is one command of a scenario file.
type directive struct {
	line     int    // 1-based line of the command
	raw      string // the command line as written
	words    []string
	output   bool   // has a ---- block
	expected string // the block's lines joined by \n
}

// item is a stretch of a scenario file: either verbatim text or a directive.
type item struct {
	text []string
	d    *directive
}

// parseScript splits a scenario into items.
func parseScript(src string) []item {
	lines := strings.Split(strings.ReplaceAll(src, "\r\n", "\n"), "\n")
	if n := len(lines); n > 0 && lines[n-1] == "" {
		lines = lines[:n-1]
	}
	var items []item
	var text []string
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "#") || t == "----" {
			text = append(text, l)
			continue
		}
		if text != nil {
			items = append(items, item{text: text})
			text = nil
		}
		d := &directive{line: i + 1, raw: l, words: strings.Fields(t)}
		if i+1 < len(lines) && strings.TrimSpace(lines[i+1]) == "----" {
			d.output = true
			i++
			var out []string
			for i+1 < len(lines) && strings.TrimSpace(lines[i+1]) != "" {
				i++
				out = append(out, lines[i])
			}
			if i+1 < len(lines) {
				i++ // the blank line that ends the block
			}
			d.expected = strings.Join(out, "\n")
		}
		items = append(items, item{d: d})
	}
	if text != nil {
		items = append(items, item{text: text})
	}
	return items
}

// formatScript writes items back, each directive with its (new) output block.
func formatScript(items []item) string {
	var b strings.Builder
	for i, it := range items {
		if it.d == nil {
			for _, l := range it.text {
				b.WriteString(l + "\n")
			}
			continue
		}
		b.WriteString(it.d.raw + "\n")
		if it.d.output {
			b.WriteString("----\n")
			if it.d.expected != "" {
				b.WriteString(it.d.expected + "\n")
			}
			// The blank line that ends the block, unless the comment text that follows
			// starts with one already.
			if i+1 == len(items) || items[i+1].d != nil || strings.TrimSpace(items[i+1].text[0]) != "" {
				b.WriteString("\n")
			}
		}
	}
	return strings.TrimRight(b.String(), "\n") + "\n"
}

// RunFiles runs every scenario file matching pattern (a filepath.Glob pattern, such as
// "testdata/*.txt") as a subtest named after the file. With -kvtest.rewrite it rewrites
// each file's expectations instead of checking them.
func RunFiles(t *testing.T, pattern string) {
	t.Helper()
	files, err := filepath.Glob(pattern)
	if err != nil {
		t.Fatalf("kvtest: %v", err)
	}
	if len(files) == 0 {
		t.Fatalf("kvtest: no scenario file matches %q", pattern)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), filepath.Ext(f)), func(t *testing.T) { RunFile(t, f) })
	}
}

// RunFile runs one scenario file against a fresh Env (New registers the end-of-test
// invariant and leak checks with tb, so a scenario must finish or abort its sequences).
// After every directive the whole stack's invariants are checked; an output that differs
// from the file's fails the test, showing both. With -kvtest.rewrite, the file is
// rewritten with the actual outputs and expectations instead.
func RunFile(tb TB, path string) {
	tb.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("kvtest: %v", err)
		return
	}
	items := parseScript(string(src))
	r := NewRunner(tb)
	r.file = path
	for _, it := range items {
		d := it.d
		if d == nil {
			continue
		}
		out, err := r.run(d)
		if err != nil && !IsExpectFailure(err) {
			tb.Fatalf("%s:%d: %s: %v", path, d.line, d.raw, err)
			return
		}
		if err != nil {
			tb.Errorf("%s:%d: %s: %v", path, d.line, d.raw, err)
		}
		if err := r.env.Check(); err != nil {
			tb.Fatalf("%s:%d: %s: %v\n%s", path, d.line, d.raw, err, r.env.Dump())
			return
		}
		if d.words[0] == "expect" {
			continue
		}
		if rewrite {
			d.output, d.expected = true, out
			continue
		}
		if !d.output {
			tb.Errorf("%s:%d: %s: no expected output (a line ---- and the output); run with -kvtest.rewrite to fill it in; got:\n%s", path, d.line, d.raw, out)
			continue
		}
		if out != d.expected {
			tb.Errorf("%s:%d: %s\nwant:\n%s\ngot:\n%s", path, d.line, d.raw, indent(d.expected), indent(out))
		}
	}
	if rewrite {
		if err := os.WriteFile(path, []byte(formatScript(items)), 0o644); err != nil {
			tb.Fatalf("kvtest: %v", err)
		}
	}
}

func indent(s string) string {
	if s == "" {
		return "    (nothing)"
	}
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}

// errScript marks a malformed command.
type scriptError struct{ msg string }

func (e *scriptError) Error() string { return e.msg }

func scriptErrorf(format string, args ...any) error {
	return &scriptError{msg: fmt.Sprintf(format, args...)}
}
