package history_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/history"
	"github.com/qinglong/ql3/internal/uring/uringtest"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
)

const pathOrigin = "example.com/ql3/logpath"

// mixedStory publishes a bit of every line kind: preflights (one with a plan), applies finished
// and not, a recovered one, live audits converged and drifting, on two clusters.
func mixedStory(s *synth) {
	s.preflight("3.4.1", "a", 0)
	_, rc := s.apply("3.4.1", "a", 1, true, false)
	s.liveAudit("3.4.1", "a", rc, 3, true)
	s.preflight("3.4.1", "b", 4)
	s.apply("3.4.1", "b", 5, false, false) // unfinished
	s.planPrev = rc
	s.preflight("3.4.2", "a", 6)
	_, rc2 := s.apply("3.4.2", "a", 7, true, true)
	s.liveAudit("3.4.2", "a", rc2, 9, false)
}

// History from the log (each record handed over by the log's check) lists the same lines as
// the listing of the indexes (the path of a store without a log), and then orders them by leaf.
func TestHistoryFromLogSameLines(t *testing.T) { uringtest.BothPaths(t, testHistoryFromLogSameLines) }

func testHistoryFromLogSameLines(t *testing.T) {
	s := newSynth(t)
	mixedStory(s)
	before, err := history.History(s.st, history.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.st.InitLog(pathOrigin); err != nil { // backfills every publication
		t.Fatal(err)
	}
	after, err := history.History(s.st, history.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if before.Order != history.OrderRecords || after.Order != history.OrderLog || len(after.Entries) != 8 {
		t.Fatalf("orders %s %s, %d lines", before.Order, after.Order, len(after.Entries))
	}
	line := func(e history.Entry) string {
		return fmt.Sprint(e.Kind, e.Time, e.Release, e.ClusterUID, e.Context, e.Recovered, e.Verdict, e.Digest, e.Command)
	}
	var a, b []string
	for _, e := range before.Entries {
		a = append(a, line(e))
	}
	for _, e := range after.Entries {
		b = append(b, line(e))
		if e.LogIndex == nil {
			t.Fatalf("line %s without its leaf", line(e))
		}
	}
	slices.Sort(a)
	slices.Sort(b)
	if !slices.Equal(a, b) {
		t.Fatalf("lines from the log differ from the index's:\n%v\n%v", b, a)
	}
}

// Every record history cannot read is refused with the same code whether the store has a log
// or not: when the log verifies (the record hashes to its name: the lines are read from what the
// log's check handed over) and when it does not (a missing or changed record: the log's finding
// sends history to the index listing, whose refusal comes first, as before).
func TestHistoryFromLogRefusals(t *testing.T) { uringtest.BothPaths(t, testHistoryFromLogRefusals) }

func testHistoryFromLogRefusals(t *testing.T) {
	for _, c := range []struct {
		name      string
		logOK     bool // the log verifies: history reads the records the log's check handed over
		want      refuse.Code
		corrupt   func(s *synth)
		afterLog  bool // corrupt after the publications (a file changed in place)
		noRecords bool
	}{
		{name: "receipt not a record", logOK: true, want: history.CodeRecordInvalid, corrupt: func(s *synth) {
			in, _ := s.apply("3.4.1", "c", 1, false, false)
			s.index(evidence.IndexReceipts, recordCommand(s, in), s.blob(evidence.MediaTypeReceipt, `{"schema":`))
		}},
		{name: "live audit of another media type", logOK: true, want: history.CodeRecordInvalid, corrupt: func(s *synth) {
			d := s.blob(evidence.MediaTypePlan, `{}`)
			s.index(evidence.IndexLiveAudits, d.Digest, d)
		}},
		{name: "live audit of another schema", logOK: true, want: history.CodeRecordInvalid, corrupt: func(s *synth) {
			d := s.blob(evidence.MediaTypeLiveAudit, `{"schema":"qinglong/ql3-plan@v1"}`)
			s.index(evidence.IndexLiveAudits, d.Digest, d)
		}},
		{name: "entry size not the record's", logOK: true, want: store.CodeObjectSize, corrupt: func(s *synth) {
			d := s.blob(evidence.MediaTypeLiveAudit, `{}`)
			d.Size++
			s.index(evidence.IndexLiveAudits, d.Digest, d)
		}},
		{name: "unfinished apply not a record", logOK: true, want: history.CodeRecordInvalid, corrupt: func(s *synth) {
			d := s.blob(evidence.MediaTypeIntent, `[]`)
			s.index(evidence.IndexIntents, digest.FromString("apply"), d)
		}},
		{name: "record published twice, second not readable", logOK: true, want: history.CodeRecordInvalid, corrupt: func(s *synth) {
			// The preflight's record, published again as a live audit: the log's check reads
			// it for the first leaf only; history reads it for the second by Get.
			d := s.pre["3.4.1c"]
			s.index(evidence.IndexLiveAudits, d.Digest, d)
		}},
		{name: "command missing", logOK: true, want: store.CodeObjectNotFound, corrupt: func(s *synth) {
			removeObject(s, recordCommand(s, s.preflight("3.4.3", "c", 9)))
		}},
		{name: "command changed", logOK: true, want: store.CodeObjectCorrupt, corrupt: func(s *synth) {
			rewriteObject(s, recordCommand(s, s.preflight("3.4.3", "c", 9)), func([]byte) []byte { return []byte(`{"schema":"qinglong/ql3-command@v1"}`) })
		}},
		{name: "command of another media type", logOK: true, want: history.CodeRecordInvalid, corrupt: func(s *synth) {
			s.cmdMediaType = evidence.MediaTypePlan
			s.preflight("3.4.3", "c", 9)
			s.cmdMediaType = ""
		}},
		{name: "record missing", logOK: false, want: store.CodeObjectNotFound, afterLog: true, corrupt: func(s *synth) {
			removeObject(s, s.pre["3.4.1c"].Digest)
		}},
		{name: "record changed", logOK: false, want: store.CodeObjectCorrupt, afterLog: true, corrupt: func(s *synth) {
			rewriteObject(s, s.pre["3.4.1c"].Digest, func(raw []byte) []byte { return bytes.Replace(raw, []byte("3.4.1"), []byte("3.4.9"), 1) })
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, withLog := range []bool{false, true} {
				s := newSynth(t)
				if withLog {
					if _, err := s.st.InitLog(pathOrigin); err != nil {
						t.Fatal(err)
					}
				}
				s.preflight("3.4.1", "c", 0)
				if !c.afterLog {
					c.corrupt(s)
				}
				s.preflight("3.4.2", "c", 10)
				if c.afterLog {
					c.corrupt(s)
				}
				if withLog {
					r, err := s.st.VerifyLog(store.LogVerifyOptions{})
					if err != nil || r.OK() != c.logOK {
						t.Fatalf("log verify: %v, ok %v (%+v), want ok %v", err, r.OK(), r.Errors, c.logOK)
					}
				}
				_, err := history.History(s.st, history.Filter{})
				if refuse.CodeOf(err) != c.want {
					t.Fatalf("with log %v: code %q, want %s (%v)", withLog, refuse.CodeOf(err), c.want, err)
				}
			}
		})
	}
}

// recordCommand is the command record that the intent or preflight d names.
func recordCommand(s *synth, d evidence.Descriptor) digest.Digest {
	s.t.Helper()
	b, err := s.st.Get(d.Digest)
	if err != nil {
		s.t.Fatal(err)
	}
	var c evidence.Descriptor
	switch d.MediaType {
	case evidence.MediaTypeIntent:
		var i evidence.Intent
		err = evidence.DecodeRecord(d.MediaType, b, &i)
		c = i.Command
	case evidence.MediaTypePreflight:
		var p evidence.Preflight
		err = evidence.DecodeRecord(d.MediaType, b, &p)
		c = p.Command
	default:
		s.t.Fatalf("%s names no command", d.MediaType)
	}
	if err != nil {
		s.t.Fatal(err)
	}
	return c.Digest
}

// rewriteObject replaces the content of the object d in place by edit's result, as a writer with
// the store's permissions could.
func rewriteObject(s *synth, d digest.Digest, edit func([]byte) []byte) {
	s.t.Helper()
	p := filepath.Join(s.st.Root(), "blobs", "sha256", d.Encoded())
	raw, err := os.ReadFile(p)
	if err != nil {
		s.t.Fatal(err)
	}
	_ = os.Chmod(p, 0o600)
	if err := os.WriteFile(p, edit(raw), 0o400); err != nil {
		s.t.Fatal(err)
	}
	_ = os.Chmod(p, 0o400)
}

func removeObject(s *synth, d digest.Digest) {
	s.t.Helper()
	if err := os.Remove(filepath.Join(s.st.Root(), "blobs", "sha256", d.Encoded())); err != nil {
		s.t.Fatal(err)
	}
}

// With several records history cannot read, the story from the log names the same one every
// time, and the one the index listing names (receipts, preflights, live audits, intents, each
// by key), however the log's workers met them.
func TestHistoryFromLogFirstErrorStable(t *testing.T) {
	uringtest.BothPaths(t, testHistoryFromLogFirstErrorStable)
}

func testHistoryFromLogFirstErrorStable(t *testing.T) {
	s := newSynth(t)
	for i := range 12 {
		rel := fmt.Sprintf("3.4.%d", i)
		s.preflight(rel, "c", 2*i)
		in, _ := s.apply(rel, "c", 2*i+1, false, false)
		s.index(evidence.IndexReceipts, recordCommand(s, in), s.blob(evidence.MediaTypeReceipt, fmt.Sprintf(`{"schema":%d`, i)))
		d := s.blob(evidence.MediaTypeLiveAudit, fmt.Sprintf(`{"schema":"%d"}`, i))
		s.index(evidence.IndexLiveAudits, d.Digest, d)
	}
	_, want := history.History(s.st, history.Filter{})
	if refuse.CodeOf(want) != history.CodeRecordInvalid {
		t.Fatalf("without a log: code %q (%v)", refuse.CodeOf(want), want)
	}
	if _, err := s.st.InitLog(pathOrigin); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		_, err := history.History(s.st, history.Filter{})
		if err == nil || err.Error() != want.Error() {
			t.Fatalf("from the log:\n%v\nwant, as the listing names it:\n%v", err, want)
		}
	}
}
