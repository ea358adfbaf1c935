// Package refuse carries ql3's stable reason codes.
//
// Every check that fails closed returns a *Error whose Code is a constant declared beside that
// check, in the package that performs it. cmd/ql3 maps a *Error to the single stderr line
// "ql3: refused: CODE: message" (plus an optional "ql3: hint: ..." line) and the exit status
// ExitStatus gives its code (exit.go): 1, or 2 for the command line's own codes, whose line reads
// "ql3: usage: CODE: message". docs/reason-codes.md lists every code with its exit status; a test
// keeps the two in step.
//
// Messages are low-sensitivity by contract: paths, digests, sizes, counts, field paths and reason
// codes only. Never put file contents, tokens, keys or certificates into Msg, Hint or Err.
package refuse

import (
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Code is a stable, upper-case reason code such as OBJECT_CORRUPT.
type Code string

// Error is a refusal with its reason code.
type Error struct {
	Code Code
	Msg  string // low-sensitivity, lower case, no trailing period
	Hint string // optional advice printed on its own line
	Err  error  // optional cause; its text is appended to Msg, so it obeys the same rules
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message() }

func (e *Error) Unwrap() error { return e.Err }

// Message is the text after "CODE: " in the refusal line. A wrapped refusal renders each code
// once: its message follows without its code when the code is the outer one (a check that adds
// context to a refusal it passes on), and after its code when it differs (a cause of another
// kind); the outermost code is the one the line starts with and the one a script reads.
func (e *Error) Message() string {
	if e.Err == nil {
		return e.Msg
	}
	var inner *Error
	if errors.As(e.Err, &inner) && inner == e.Err {
		if inner.Code == e.Code {
			return e.Msg + ": " + inner.Message()
		}
		return e.Msg + ": " + inner.Error()
	}
	return e.Msg + ": " + escapeControls(e.Err.Error())
}

// New returns a refusal; its exit status is its code's (ExitStatus).
func New(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Msg: sprintf(format, args...)}
}

// Wrap returns a refusal that keeps err as its cause.
func Wrap(code Code, err error, format string, args ...any) *Error {
	return &Error{Code: code, Msg: sprintf(format, args...), Err: err}
}

// WithHint sets the hint and returns e, for chaining at the raise site.
func (e *Error) WithHint(format string, args ...any) *Error {
	e.Hint = sprintf(format, args...)
	return e
}

// CodeOf returns the reason code of the first *Error in err's chain, or "" when there is none.
func CodeOf(err error) Code {
	var r *Error
	if errors.As(err, &r) {
		return r.Code
	}
	return ""
}

// Detail is err's text for a finding that carries CodeOf(err) in a field of its own: a refusal's
// message without its leading "CODE: ", so that a listed finding never shows its code twice.
func Detail(err error) string {
	if r, ok := err.(*Error); ok {
		return r.Message()
	}
	return escapeControls(err.Error())
}

// As returns the first *Error in err's chain.
func As(err error) (*Error, bool) {
	var r *Error
	ok := errors.As(err, &r)
	return r, ok
}

// Ident renders a name taken from untrusted input (a member name, an object name, a manager) for
// a message: as is when it is a short run of identifier characters, else quoted (so control and
// look-alike characters show) and cut at a rune boundary after 64 bytes, so that a hostile input
// can neither forge a message nor make it arbitrarily long.
func Ident(s string) string {
	const max = 64
	if len(s) > 0 && len(s) <= max && strings.Trim(s, identChars) == "" {
		return s
	}
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return strconv.Quote(s[:cut]) + "..."
	}
	return strconv.Quote(s)
}

const identChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:"
