package history_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/qinglong/ql3/deploylog"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/history"
)

// A store with a log: the entries are ordered by leaf index, newest first, even where the
// records' times say otherwise; the signed line names the checkpoint; the leaves after it are
// marked unsigned, in text and JSON.
func TestHistoryFromLog(t *testing.T) {
	s := newSynth(t)
	const a = "11111111-aaaa"
	s.preflight("3.4.1", a, 0)
	_, rc1 := s.apply("3.4.1", a, 1, true, false) // 3 leaves: preflight, intent, receipt
	if _, err := s.st.InitLog("example.com/ql3/test"); err != nil {
		t.Fatal(err)
	}
	skey, _, err := deploylog.GenerateKey("example.com/ql3/test")
	if err != nil {
		t.Fatal(err)
	}
	signer, err := deploylog.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.st.SignCheckpoint(signer); err != nil {
		t.Fatal(err)
	}
	la := s.liveAudit("3.4.1", a, rc1, 30, true) // leaf 3, unsigned
	s.preflight("3.4.2", a, 10)                  // leaf 4, unsigned: its time is earlier than the live audit's

	rep, err := history.History(s.st, history.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Order != history.OrderLog || rep.Log == nil || rep.Log.Size != 5 || rep.Log.Checkpoint != 3 || rep.Log.UnsignedTail != 2 ||
		rep.Log.Cosignatures != 0 || rep.Log.SignatureChecked {
		t.Fatalf("order %q log %+v", rep.Order, rep.Log)
	}
	var got []string
	for _, e := range rep.Entries {
		got = append(got, fmt.Sprint(*e.LogIndex, " ", e.Kind, " ", e.Unsigned))
	}
	want := "4 preflight true\n3 live-audit true\n2 receipt false\n0 preflight false"
	if strings.Join(got, "\n") != want {
		t.Fatalf("entries:\n%s\nwant:\n%s", strings.Join(got, "\n"), want)
	}
	if rep.Entries[1].Digest != la.Digest {
		t.Fatalf("entry 1 is %s, want the live audit %s", rep.Entries[1].Digest, la.Digest)
	}
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(text.String()), "\n")
	if len(lines) != 7 || lines[0] != "order: the deployment log example.com/ql3/test, 5 leaves" ||
		lines[1] != "log: signatures not checked (give --log-key VKEY or --policy FILE): the largest stored checkpoint has size 3 (0 witness cosignatures kept), 2 leaves in the unsigned tail" ||
		!strings.HasPrefix(lines[2], "LEAF ") || !strings.HasPrefix(lines[3], "4 unsigned ") || !strings.HasPrefix(lines[4], "3 unsigned ") ||
		!strings.HasPrefix(lines[5], "2  ") {
		t.Fatalf("text:\n%s", text.String())
	}
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{`"order": "log"`, `"checkpoint": 3`, `"unsignedTail": 2`, `"logIndex": 4`, `"unsigned": true`} {
		if !strings.Contains(js.String(), w) {
			t.Fatalf("json lacks %s:\n%s", w, js.String())
		}
	}
	for _, c := range []struct {
		d        evidence.Descriptor
		idx      int64
		unsigned bool
	}{{la, 3, true}, {rc1, 2, false}} {
		d, err := history.Describe(s.st, c.d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		if d.Order != history.OrderLog || d.LogIndex == nil || *d.LogIndex != c.idx || d.Unsigned != c.unsigned || d.Log.Checkpoint != 3 {
			t.Fatalf("describe %s: order %q index %v unsigned %v", c.d.Digest, d.Order, d.LogIndex, d.Unsigned)
		}
		var text bytes.Buffer
		d.WriteText(&text)
		if c.unsigned != strings.Contains(text.String(), fmt.Sprintf("log leaf:       %d (in the unsigned tail)\n", c.idx)) ||
			!strings.HasPrefix(text.String(), "order: the deployment log example.com/ql3/test, 5 leaves\nlog: signatures not checked ") {
			t.Fatalf("describe text:\n%s", text.String())
		}
	}
}
