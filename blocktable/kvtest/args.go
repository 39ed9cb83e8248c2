package kvtest

import (
	"strconv"
	"strings"
)

// args is a parsed command line: the command, positional words and key=value pairs.
type args struct {
	cmd  string
	pos  []string
	kv   map[string]string
	keys []string // in order
	used map[string]bool
	npos int // positional words read
}

func parseArgs(words []string) (*args, error) {
	a := &args{cmd: words[0], kv: map[string]string{}, used: map[string]bool{}}
	for _, w := range words[1:] {
		k, v, ok := strings.Cut(w, "=")
		if !ok {
			a.pos = append(a.pos, w)
			continue
		}
		if k == "" {
			return nil, scriptErrorf("%q: empty key", w)
		}
		if _, dup := a.kv[k]; dup {
			return nil, scriptErrorf("%s given twice", k)
		}
		a.kv[k] = v
		a.keys = append(a.keys, k)
	}
	return a, nil
}

func (a *args) str(key string) (string, bool) {
	v, ok := a.kv[key]
	if ok {
		a.used[key] = true
	}
	return v, ok
}

func (a *args) num(key string, def, lo, hi int) (int, error) {
	v, ok := a.str(key)
	if !ok {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, scriptErrorf("%s=%q: want an integer in [%d, %d]", key, v, lo, hi)
	}
	return n, nil
}

func (a *args) boolean(key string, def bool) (bool, error) {
	v, ok := a.str(key)
	if !ok {
		return def, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, scriptErrorf("%s=%q: want true or false", key, v)
	}
	return b, nil
}

func (a *args) posWord(i string, idx int) (string, error) {
	if idx >= len(a.pos) {
		return "", scriptErrorf("%s: missing %s", a.cmd, i)
	}
	a.npos = max(a.npos, idx+1)
	return a.pos[idx], nil
}

func (a *args) posInt(idx, lo, hi int) (int, error) {
	w, err := a.posWord("a number", idx)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(w)
	if err != nil || n < lo || n > hi {
		return 0, scriptErrorf("%s: %q: want an integer in [%d, %d]", a.cmd, w, lo, hi)
	}
	return n, nil
}

func (a *args) posName(idx int) (string, error) {
	w, err := a.posWord("a sequence name", idx)
	if err != nil {
		return "", err
	}
	return w, checkName(w)
}

// checkName rejects sequence names that expect keys could not address.
func checkName(name string) error {
	if name == "" || strings.ContainsAny(name, ".=,") {
		return scriptErrorf("bad sequence name %q (no '.', '=' or ',')", name)
	}
	return nil
}

// done rejects words the command did not read.
func (a *args) done() error {
	if a.npos < len(a.pos) {
		return scriptErrorf("%s: unexpected %q", a.cmd, a.pos[a.npos])
	}
	for _, k := range a.keys {
		if !a.used[k] {
			return scriptErrorf("%s: unknown argument %s=", a.cmd, k)
		}
	}
	return nil
}
