package refuse

import (
	"errors"
	"strings"
	"testing"
)

// TestNestedCodeOnce: a refusal wrapped with its own code renders that code once; a cause of
// another code keeps its code after the outer message; a plain cause is appended as is.
func TestNestedCodeOnce(t *testing.T) {
	inner := New("OBJECT_CORRUPT", "object %s does not hash to its name", "sha256:ab")
	vectors := []struct {
		err  *Error
		want string // Error()
	}{
		{Wrap("OBJECT_CORRUPT", inner, "exec 0 (identity)"), "OBJECT_CORRUPT: exec 0 (identity): object sha256:ab does not hash to its name"},
		{Wrap("AUDIT_CHAIN", inner, "receipt"), "AUDIT_CHAIN: receipt: OBJECT_CORRUPT: object sha256:ab does not hash to its name"},
		{Wrap("AUDIT_CHAIN", Wrap("AUDIT_CHAIN", inner, "intent"), "receipt"), "AUDIT_CHAIN: receipt: intent: OBJECT_CORRUPT: object sha256:ab does not hash to its name"},
		{Wrap("STORE_IO", errors.New("no space left on device"), "write staging file"), "STORE_IO: write staging file: no space left on device"},
		{New("X", "plain"), "X: plain"},
	}
	for _, v := range vectors {
		if got := v.err.Error(); got != v.want {
			t.Errorf("Error() = %q, want %q", got, v.want)
		}
		if got, want := v.err.Message(), strings.TrimPrefix(v.want, string(v.err.Code)+": "); got != want {
			t.Errorf("Message() = %q, want %q", got, want)
		}
	}
}

// TestDetailDropsTheCode: a finding that lists CodeOf(err) beside its message gets the refusal's
// message without the code (once, never "CODE: CODE:"); a plain error keeps its text, escaped.
func TestDetailDropsTheCode(t *testing.T) {
	inner := New("LOG_CHECKPOINT_SIGNATURE", "checkpoint at size %d has no signature by the log key", 5)
	vectors := []struct {
		err  error
		want string
	}{
		{inner, "checkpoint at size 5 has no signature by the log key"},
		{Wrap("LOG_CHECKPOINT_SIGNATURE", inner, "checkpoint 5"), "checkpoint 5: checkpoint at size 5 has no signature by the log key"},
		{Wrap("POLICY_LOG_SIGNATURE", inner, "policy"), "policy: LOG_CHECKPOINT_SIGNATURE: checkpoint at size 5 has no signature by the log key"},
		{errors.New("read leaf\nfake line"), `read leaf\nfake line`},
	}
	for _, v := range vectors {
		if got := Detail(v.err); got != v.want {
			t.Errorf("Detail(%q) = %q, want %q", v.err, got, v.want)
		}
	}
}
