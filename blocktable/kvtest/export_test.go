package kvtest

// Hooks for the external tests of this package.

// SetRewrite turns -kvtest.rewrite on or off and returns a function that restores it.
func SetRewrite(on bool) (restore func()) {
	old := rewrite
	rewrite = on
	return func() { rewrite = old }
}

// NewLenientRunner returns a Runner that lets config rebuild the stack at any time
// (aborting what the old one held), as FuzzScenario needs.
func NewLenientRunner(tb TB) *Runner {
	r := NewRunner(tb)
	r.lenient = true
	return r
}

// Reformat parses a scenario and writes it back.
func Reformat(src string) string { return formatScript(parseScript(src)) }
