package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/internal/invariant"
)

// readmeCommand is one `go run ./bench/cmd/kvpage ...` line of the README, with the
// comment line above it.
type readmeCommand struct {
	line    int
	args    []string
	comment string
}

// readmeCommands extracts every kvpage command line from the README's sh blocks.
func readmeCommands(t *testing.T) []readmeCommand {
	t.Helper()
	fh, err := os.Open(filepath.Join("..", "..", "..", "README.md"))
	require.NoError(t, err)
	defer fh.Close()
	var cmds []readmeCommand
	inSh, comment := false, ""
	sc := bufio.NewScanner(fh)
	for n := 1; sc.Scan(); n++ {
		l := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(l, "```"):
			inSh, comment = l == "```sh", ""
		case !inSh:
		case strings.HasPrefix(l, "#"):
			comment = l
		case strings.HasPrefix(l, "go run ./bench/cmd/kvpage"):
			rest := strings.TrimPrefix(l, "go run ./bench/cmd/kvpage")
			if i := strings.Index(rest, " #"); i >= 0 {
				rest = rest[:i]
			}
			args, err := shellSplit(rest)
			require.NoError(t, err, "README line %d", n)
			cmds = append(cmds, readmeCommand{line: n, args: args, comment: comment})
			comment = ""
		default:
			comment = ""
		}
	}
	require.NoError(t, sc.Err())
	return cmds
}

// shellSplit splits a command line as sh would for plain words and ” or "" quotes.
func shellSplit(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	inWord, quote := false, byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0 && c == quote:
			quote = 0
		case quote != 0:
			cur.WriteByte(c)
		case c == '\'' || c == '"':
			quote, inWord = c, true
		case c == ' ' || c == '\t':
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated quote in %q", s)
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out, nil
}

// textbook is what the README's textbook commands must print: the text's rounded figure
// and the JSON field that holds it, by subcommand and length.
var textbook = map[string]struct {
	field string
	text  float64
}{
	"plan --max-model-len 4k":   {"max_concurrency", 300},
	"plan --max-model-len 128k": {"max_concurrency", 9},
	"fleet --avg-context 8k":    {"gpus_needed", 66},
	"fleet --avg-context 4k":    {"gpus_needed", 33},
	"fleet --avg-context 32k":   {"gpus_needed", 260},
}

func textbookKey(args []string) string {
	if len(args) < 2 {
		return ""
	}
	for i, a := range args[:len(args)-1] {
		if a == "--max-model-len" || a == "--avg-context" {
			return args[0] + " " + a + " " + args[i+1]
		}
	}
	return ""
}

// exactFigure is the command's own figure, at the end of the comment above it: "(305)",
// "(the command: 305)".
var exactFigure = regexp.MustCompile(`\((?:[^()]*: )?([0-9,]+)\)$`)

// Every kvpage command line of the README runs, through the command's entry point, and
// the textbook's examples print the text's figures within 5%, and exactly the figure the
// README gives beside them.
func TestReadmeCommands(t *testing.T) {
	cmds := readmeCommands(t)
	require.GreaterOrEqual(t, len(cmds), 10, "the README's commands were not found")
	seen := map[string]bool{}
	for _, c := range cmds {
		args := append([]string{}, c.args...)
		name := "sim"
		if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
			name = args[0]
		}
		help := false
		for _, a := range args {
			help = help || isHelp(a) || a == "help"
		}
		if name == "sim" && !help {
			args = append(args, "--out-dir", t.TempDir(), "--no-progress")
			if invariant.Enabled {
				// -race and kvinvariants builds re-check every invariant at every step,
				// over every block of the pool: the default 10,000 requests on 448,308
				// tokens take many minutes there. The command line is the README's, on
				// a small run (the normal build runs it as written).
				args = append(args, "--num-prompts", "60", "--kv-budget-tokens", "6k", "--block-size-sweep", "8")
			}
		}
		code, out, errOut := runKV(args...)
		require.Equal(t, 0, code, "README line %d: kvpage %s\n%s", c.line, strings.Join(c.args, " "), errOut)
		require.NotEmpty(t, out, "README line %d", c.line)

		key := textbookKey(c.args)
		want, isTextbook := textbook[key]
		isTextbook = isTextbook && strings.Contains(strings.Join(c.args, " "), "--kv-bytes-per-token 0.05MB")
		if !isTextbook {
			continue
		}
		seen[key] = true
		code, out, errOut = runKV(append(append([]string{}, c.args...), "--json")...)
		require.Equal(t, 0, code, errOut)
		var obj map[string]any
		require.NoError(t, json.Unmarshal([]byte(out), &obj))
		got, ok := obj[want.field].(float64)
		require.True(t, ok, "README line %d: no %s in %s", c.line, want.field, out)
		assert.InDelta(t, want.text, got, 0.05*want.text, "README line %d (%s): %s %v against the text's %v", c.line, key, want.field, got, want.text)
		m := exactFigure.FindStringSubmatch(c.comment)
		if assert.NotNil(t, m, "README line %d: the comment above gives the command's figure in parentheses: %q", c.line, c.comment) {
			n, err := strconv.ParseFloat(strings.ReplaceAll(m[1], ",", ""), 64)
			require.NoError(t, err)
			assert.Equal(t, n, got, "README line %d: the figure beside the command", c.line)
		}
		assert.Less(t, math.Abs(got-want.text), 0.05*want.text+1e-9)
	}
	for key := range textbook {
		assert.True(t, seen[key], "the README has no textbook command for %s", key)
	}
}

func TestShellSplit(t *testing.T) {
	got, err := shellSplit(` sim --block-size-sweep "" --x 'a b' c`)
	require.NoError(t, err)
	assert.Equal(t, []string{"sim", "--block-size-sweep", "", "--x", "a b", "c"}, got)
	_, err = shellSplit(`"open`)
	assert.Error(t, err)
}
