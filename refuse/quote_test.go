package refuse_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/qinglong/ql3/refuse"
)

// Finding 16 of issue 22: a path holding a control character is quoted; a plain one is not.
func TestQuoted(t *testing.T) {
	vectors := []struct{ in, want string }{
		{"/home/op/ql3/apply.json", "/home/op/ql3/apply.json"},
		{"/home/op/with space/a.json", "/home/op/with space/a.json"},
		{"/tmp/a\nql3: refused: FAKE", `"/tmp/a\nql3: refused: FAKE"`},
		{"/tmp/\x1b[31mred", `"/tmp/\x1b[31mred"`},
		{"/tmp/\u202egnp.json", `"/tmp/\u202egnp.json"`},
		{"/tmp/\xff", `"/tmp/\xff"`},
	}
	for _, v := range vectors {
		if got := refuse.Quoted(v.in); got != v.want {
			t.Errorf("Quoted(%q) = %s, want %s", v.in, got, v.want)
		}
	}
}

// ShellQuote'd arguments reach a real shell as they were: every vector round-trips through bash.
func TestShellQuoteRoundTrip(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	for _, s := range []string{"/plain/path.json", "/with space/x", "/it's/here", "/a\nb", "/esc\x1b[0m", "/dollar$HOME`id`", "/back\\slash", "/\u202e"} {
		line := "printf %s " + refuse.ShellQuote(s)
		if strings.Contains(line, "\n") {
			t.Fatalf("ShellQuote(%q) spans lines: %s", s, line)
		}
		out, err := exec.Command(bash, "-c", line).Output()
		if err != nil || string(out) != s {
			t.Errorf("%s: got %q (%v), want %q", line, out, err, s)
		}
	}
	if got := refuse.ShellLine("ql3", "apply", "--command-file=/a b"); got != "ql3 apply '--command-file=/a b'" {
		t.Errorf("ShellLine: %s", got)
	}
}

// Every refusal quotes a string argument that holds a control character, whichever check raised
// it, and escapes the control characters of a cause's text; plain arguments print as before.
func TestRefusalQuotesControlCharacters(t *testing.T) {
	e := refuse.Wrap("X", &os.PathError{Op: "open", Path: "/a\nb", Err: os.ErrNotExist}, "manifest %s cannot be read (%q)", "/a\nql3: refused: FAKE", "/q\x1b").
		WithHint("chmod 600 %s", "/h\rx")
	msg := e.Message()
	if strings.ContainsAny(msg, "\n\r\x1b") || strings.ContainsAny(e.Hint, "\n\r\x1b") {
		t.Fatalf("control character printed: %q / %q", msg, e.Hint)
	}
	want := `manifest "/a\nql3: refused: FAKE" cannot be read ("/q\x1b"): open /a\nb: file does not exist`
	if msg != want || e.Hint != `chmod 600 "/h\rx"` {
		t.Fatalf("message %s\nhint %s", msg, e.Hint)
	}
	if got := refuse.New("X", "manifest %s is %d bytes", "/plain/m.yaml", 3).Message(); got != "manifest /plain/m.yaml is 3 bytes" {
		t.Fatalf("plain: %s", got)
	}
}
