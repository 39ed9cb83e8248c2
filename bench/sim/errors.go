package sim

import (
	"errors"
	"fmt"
)

// Sentinel errors; every error this package returns for bad input wraps one of them, to be
// tested with errors.Is.
var (
	// ErrBadTrace: a trace file that cannot be read as a trace (a malformed row, a missing
	// column, a value out of range). The error says where (see TraceError).
	ErrBadTrace = errors.New("sim: bad trace")
	// ErrInvalidConfig: a configuration the simulator cannot run (a capacity too small for
	// one request, a cap below another, an unknown scheme or workload).
	ErrInvalidConfig = errors.New("sim: invalid configuration")
)

// TraceError locates one problem in a trace file. It wraps ErrBadTrace.
type TraceError struct {
	// Line is the 1-based line of the file where the bad record starts (0 if unknown).
	Line int
	// Field names the column or key concerned ("" for the record as a whole).
	Field string
	// Msg says what is wrong.
	Msg string
}

func (e *TraceError) Error() string {
	switch {
	case e.Line > 0 && e.Field != "":
		return fmt.Sprintf("trace line %d: %s: %s", e.Line, e.Field, e.Msg)
	case e.Line > 0:
		return fmt.Sprintf("trace line %d: %s", e.Line, e.Msg)
	case e.Field != "":
		return fmt.Sprintf("trace: %s: %s", e.Field, e.Msg)
	}
	return "trace: " + e.Msg
}

// Unwrap returns ErrBadTrace.
func (e *TraceError) Unwrap() error { return ErrBadTrace }

func traceErr(line int, field, format string, args ...any) error {
	return &TraceError{Line: line, Field: field, Msg: fmt.Sprintf(format, args...)}
}
