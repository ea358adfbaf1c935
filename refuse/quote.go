package refuse

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Quoted renders a path or value taken from the command line, a file or the store for a message,
// a hint, a progress line or a review: as is when it holds no control character, else quoted
// with Go's escapes, so that a name holding a newline, an escape sequence or a bidirectional
// override can never print a line, a colour or a reordering ql3 did not write (issue 22). Invalid
// UTF-8 and Unicode format characters (U+202E and its kin) count as control characters. Unlike
// Ident it never cuts: a path must stay recognizable.
func Quoted(s string) string {
	if printable(s) {
		return s
	}
	return strconv.Quote(s)
}

func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == utf8.RuneError {
			return false
		}
	}
	return true
}

// ShellQuote renders one argument of a command line ql3 prints for the operator to run (a
// `next:` line, a rerun hint), so that the line runs as printed in a POSIX shell: as is when it is
// made of characters no shell interprets, in single quotes otherwise, and in bash's $'...' form
// with escapes when it holds a control character (so that the printed line stays one line).
func ShellQuote(s string) string {
	if s != "" && strings.Trim(s, shellSafe) == "" {
		return s
	}
	if printable(s) {
		return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
	}
	var b strings.Builder
	b.WriteString("$'")
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' || c == '\'':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c >= 0x7f:
			b.WriteString(`\x`)
			b.WriteString(strconv.FormatUint(uint64(c)>>4, 16))
			b.WriteString(strconv.FormatUint(uint64(c)&15, 16))
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('\'')
	return b.String()
}

const shellSafe = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=@%+,"

// ShellLine joins a program and its arguments, each ShellQuote'd.
func ShellLine(args ...string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = ShellQuote(a)
	}
	return strings.Join(q, " ")
}

// sprintf formats a message or hint with every string argument that holds a control character
// quoted (Quoted), so that no path or value a refusal names can print a line ql3 did not write,
// whichever check raised it.
func sprintf(format string, args ...any) string {
	var own []any // a copy, made only when an argument must change: args may be the caller's slice
	for i, a := range args {
		if s, ok := a.(string); ok && !printable(s) {
			if own == nil {
				own = append([]any(nil), args...)
			}
			own[i] = quotedArg(s)
		}
	}
	if own != nil {
		args = own
	}
	return fmt.Sprintf(format, args...)
}

// quotedArg prints as Quoted under %s and %v, and as %q under %q (never quoted twice).
type quotedArg string

func (q quotedArg) Format(f fmt.State, verb rune) {
	_, _ = io.WriteString(f, strconv.Quote(string(q)))
}

// escapeControls escapes the control characters of a cause's text (an operating system error
// names the path it failed on) with Go's escapes, leaving the rest as is.
func escapeControls(s string) string {
	if printable(s) {
		return s
	}
	var b strings.Builder
	for _, r := range strings.ToValidUTF8(s, "\ufffd") {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
