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
