// Package argerr is the module's one kind of invalid-argument sentinel. Every package
// that reports bad input (blocks, blocks/sizing, evict, prefix, blocktable, and the
// events, cluster and transport packages) defines its exported ErrInvalidArgument (or
// ErrInvalid) with New, under its own message, and errors.Is matches each of them against
// every other: a caller tests any one of them, whichever package refused, and still reads
// which one in the message. Nothing outside the module can import it.
package argerr

// sentinel is one package's invalid-argument error.
type sentinel struct{ msg string }

// New returns a package's invalid-argument sentinel with message msg ("blocks: invalid
// argument"). Call it once per package, in a var declaration.
func New(msg string) error { return &sentinel{msg: msg} }

func (e *sentinel) Error() string { return e.msg }

// Is makes every package's sentinel match every other's (errors.Is).
func (e *sentinel) Is(target error) bool {
	_, ok := target.(*sentinel)
	return ok
}
