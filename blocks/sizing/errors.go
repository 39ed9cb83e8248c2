package sizing

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kvpage/kvpage/internal/argerr"
)

// Sentinel errors of the sizing arithmetic. Every error the sizing functions return for bad
// input wraps one of these or ErrInvalidArgument, so callers test with errors.Is.
var (
	// ErrBadSize: a token count such as "32q", "-5" or "2.5K" that does not parse.
	ErrBadSize = errors.New("sizing: bad size")
	// ErrUnknownModel: a model name that is not a built-in preset.
	ErrUnknownModel = errors.New("sizing: unknown model")
	// ErrUnknownGPU: a GPU name that is not a built-in preset.
	ErrUnknownGPU = errors.New("sizing: unknown GPU")
	// ErrUnknownDType: a cache or weight data type the sizing does not know.
	ErrUnknownDType = errors.New("sizing: unknown data type")
	// ErrMissingField: a model config that lacks a field the sizing needs.
	ErrMissingField = errors.New("sizing: missing config field")
	// ErrBadConfig: a model config whose fields are present but unusable (wrong type,
	// zero heads, a layer type the sizing cannot model).
	ErrBadConfig = errors.New("sizing: bad model config")
	// ErrDoesNotFit: a plan under which the server could not start or could not hold one
	// request at its maximum model length.
	ErrDoesNotFit = errors.New("sizing: does not fit")
	// ErrInvalidArgument: a negative count, a fraction out of range or a size that
	// overflows. It matches (errors.Is) blocks.ErrInvalidArgument and every other
	// package's invalid-argument sentinel, and they match it.
	ErrInvalidArgument = argerr.New("sizing: invalid argument")
)

// ErrConfigTooDeep: a model config whose objects and arrays nest more than MaxConfigDepth
// levels. It wraps ErrBadConfig.
var ErrConfigTooDeep = fmt.Errorf("%w: nested too deeply", ErrBadConfig)

// SizeError says which input failed to parse as a size and why. It wraps ErrBadSize.
type SizeError struct {
	Input  string
	Reason string
}

func (e *SizeError) Error() string {
	return fmt.Sprintf("sizing: bad size %q: %s", e.Input, e.Reason)
}

// Unwrap returns ErrBadSize.
func (e *SizeError) Unwrap() error { return ErrBadSize }

// FieldError names the config field that is missing or unusable. It wraps ErrMissingField
// or ErrBadConfig.
type FieldError struct {
	Field  string // the JSON key, dotted for nested keys ("text_config.num_hidden_layers")
	Reason string
	Err    error
}

func (e *FieldError) Error() string {
	if e.Reason == "" {
		return fmt.Sprintf("sizing: model config: %v: %s", e.Err, e.Field)
	}
	return fmt.Sprintf("sizing: model config: field %s: %s", e.Field, e.Reason)
}

// Unwrap returns ErrMissingField or ErrBadConfig.
func (e *FieldError) Unwrap() error { return e.Err }

func missingField(field, hint string) error {
	r := "is missing"
	if hint != "" {
		r += " (" + hint + ")"
	}
	return &FieldError{Field: field, Reason: r, Err: ErrMissingField}
}

func badField(field, format string, args ...any) error {
	return &FieldError{Field: field, Reason: fmt.Sprintf(format, args...), Err: ErrBadConfig}
}

// UnknownNameError is returned for a model or GPU name that is not a preset. Closest holds
// the preset names nearest to it by edit distance, best first. It wraps ErrUnknownModel or
// ErrUnknownGPU.
type UnknownNameError struct {
	Kind    string // "model" or "GPU"
	Name    string
	Closest []string
	Err     error
}

func (e *UnknownNameError) Error() string {
	msg := fmt.Sprintf("sizing: unknown %s %q", e.Kind, e.Name)
	if len(e.Closest) > 0 {
		what := "presets"
		if e.Err == ErrUnknownDType {
			what = "names"
		}
		msg += "; closest " + what + ": " + strings.Join(e.Closest, ", ")
	}
	return msg
}

// Unwrap returns ErrUnknownModel or ErrUnknownGPU.
func (e *UnknownNameError) Unwrap() error { return e.Err }

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidArgument}, args...)...)
}
