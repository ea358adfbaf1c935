// Package history reads a store offline and tells a release's life on its clusters (issue 9):
// History lists every receipt, preflight, live audit and unfinished apply, newest first, and
// Describe summarises one root record for a human. Both only read: they open no network connection,
// run no program and write nothing. Every object they read is re-hashed by the store and every
// record is decoded under the record rules, so a tampered store is refused, not summarised.
package history

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/refuse"
	"github.com/qinglong/ql3/store"
)

// SchemaHistory is the schema of History's JSON output.
const SchemaHistory = "qinglong/ql3-history@v1"

// Reason codes of history and describe.
const (
	// CodeNotRoot: the digest names no root record of the store (a receipt, preflight report,
	// live-audit report or apply intent that the store's index publishes).
	CodeNotRoot refuse.Code = "DESCRIBE_NOT_ROOT"
	// CodeRecordInvalid: a record the index names does not decode, or its time is not RFC 3339.
	CodeRecordInvalid refuse.Code = "HISTORY_RECORD_INVALID"
	// CodeClusterFilter: the --cluster filter is empty or not a plausible uid.
	CodeClusterFilter refuse.Code = "HISTORY_CLUSTER_INVALID"
)

// Entry kinds.
const (
	KindReceipt    = "receipt"
	KindPreflight  = "preflight"
	KindLiveAudit  = "live-audit"
	KindUnfinished = "unfinished-apply"
)

// Entry is one line of the history.
type Entry struct {
	Time       string        `json:"time"` // finishedAt (createdAt of an unfinished apply's intent)
	Kind       string        `json:"kind"`
	Release    string        `json:"release"`
	ClusterUID string        `json:"clusterUid"`
	Context    string        `json:"context"`
	Recovered  bool          `json:"recovered"`
	Verdict    string        `json:"verdict"` // a live audit's: "converged" or "drift N/M"; "" otherwise
	Digest     digest.Digest `json:"digest"`  // the root record (the intent of an unfinished apply)
	Command    digest.Digest `json:"command"`
	at         time.Time
}

// Report is History's JSON output.
type Report struct {
	Schema  string  `json:"schema"`
	Store   string  `json:"store"`
	Cluster string  `json:"cluster,omitempty"`
	Entries []Entry `json:"entries"`
}

// Filter narrows the history.
type Filter struct {
	Cluster string // only this kube-system uid; "" for every cluster
}

// History returns every receipt, preflight report, live-audit report and unfinished apply of st
// (of f.Cluster only, when set), newest first.
func History(st *store.Store, f Filter) (*Report, error) {
	if f.Cluster != "" && (len(f.Cluster) > 256 || strings.ContainsAny(f.Cluster, " \t\r\n\x00/")) {
		return nil, refuse.New(CodeClusterFilter, "cluster filter %s is not a kube-system uid", refuse.Ident(f.Cluster))
	}
	sc, err := scan(st)
	if err != nil {
		return nil, err
	}
	rep := &Report{Schema: SchemaHistory, Store: st.Root(), Cluster: f.Cluster, Entries: []Entry{}}
	for _, e := range sc.entries {
		if f.Cluster == "" || e.ClusterUID == f.Cluster {
			rep.Entries = append(rep.Entries, e)
		}
	}
	return rep, nil
}

// WriteText prints the history as aligned columns, newest first.
func (r *Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tKIND\tRELEASE\tCLUSTER\tCONTEXT\tRECOVERED\tVERDICT\tDIGEST")
	for _, e := range r.Entries {
		rec := "-"
		if e.Kind == KindReceipt || e.Kind == KindUnfinished {
			rec = fmt.Sprint(e.Recovered)
		}
		v := e.Verdict
		if v == "" {
			v = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Time, e.Kind, e.Release, e.ClusterUID, refuse.Ident(e.Context), rec, v, Short(e.Digest))
	}
	return tw.Flush()
}

// WriteJSON prints the report as one JSON document.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// Short is a digest short enough to read: its algorithm and first 12 hex digits.
func Short(d digest.Digest) string {
	if len(d.Encoded()) < 12 {
		return string(d)
	}
	return string(d.Algorithm()) + ":" + d.Encoded()[:12]
}

// receipt is one published receipt.
type receipt struct {
	desc                         evidence.Descriptor
	release, cluster, finishedAt string
	at                           time.Time
}

// scanned is everything History and Describe need from the index.
type scanned struct {
	entries  []Entry
	receipts []receipt // oldest first
	contexts map[digest.Digest]string
	st       *store.Store
	strict   bool // decode under the full record rules (Describe); a listing reads fields only
}

func parseTime(s string, d digest.Digest) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return t, refuse.New(CodeRecordInvalid, "record %s has time %s, not rfc 3339", d, refuse.Ident(s))
	}
	return t, nil
}

// load reads the record d names into v, which must carry the schema mediaType names.
func (sc *scanned) load(d evidence.Descriptor, mediaType string, v any) error {
	if d.MediaType != mediaType {
		return refuse.New(CodeRecordInvalid, "index names %s with media type %s, want %s", d.Digest, refuse.Ident(d.MediaType), mediaType)
	}
	b, err := sc.st.Get(d.Digest)
	if err != nil {
		return err
	}
	if int64(len(b)) != d.Size {
		return refuse.New(store.CodeObjectSize, "object %s has %d bytes, its index entry says %d", d.Digest, len(b), d.Size)
	}
	if sc.strict {
		if err := evidence.DecodeRecord(mediaType, b, v); err != nil {
			return refuse.Wrap(CodeRecordInvalid, err, "record %s", d.Digest)
		}
		return nil
	}
	// A listing reads thousands of records: the store re-hashed this one against its name, so it
	// is the record the ceremony wrote; the few fields a line shows are read with encoding/json
	// into a narrow shape and the schema is checked. The full record rules are the auditor's
	// (ql3 audit), and Describe applies them.
	if err := json.Unmarshal(b, v); err != nil {
		return refuse.Wrap(CodeRecordInvalid, err, "record %s", d.Digest)
	}
	want, _ := evidence.RecordSchema(mediaType)
	if s, ok := v.(interface{ schema() string }); ok && s.schema() != want {
		return refuse.New(CodeRecordInvalid, "record %s is not a %s record", d.Digest, want)
	}
	return nil
}

// line is the narrow shape of every root record a history line reads.
type line struct {
	Schema     string `json:"schema"`
	Command    evidence.Descriptor
	Preflight  evidence.Descriptor
	Lock       struct{ ReleaseVersion string }
	ClusterUID string
	Recovered  bool
	FinishedAt string
	CreatedAt  string
	Converged  bool
	Verdicts   []struct{ Verdict string }
}

func (l *line) schema() string { return l.Schema }

type commandLine struct {
	Schema     string `json:"schema"`
	Kubeconfig struct{ Context string }
}

func (c *commandLine) schema() string { return c.Schema }

// context returns the kubeconfig context of the command record d (read once per command).
func (sc *scanned) context(d evidence.Descriptor) (string, error) {
	if c, ok := sc.contexts[d.Digest]; ok {
		return c, nil
	}
	var ctx string
	if sc.strict {
		var c evidence.Command
		if err := sc.load(d, evidence.MediaTypeCommand, &c); err != nil {
			return "", err
		}
		ctx = c.Kubeconfig.Context
	} else {
		var c commandLine
		if err := sc.load(d, evidence.MediaTypeCommand, &c); err != nil {
			return "", err
		}
		ctx = c.Kubeconfig.Context
	}
	sc.contexts[d.Digest] = ctx
	return ctx, nil
}

func scan(st *store.Store) (*scanned, error) {
	sc := &scanned{st: st, contexts: map[digest.Digest]string{}}
	add := func(kind string, key evidence.Descriptor, l *line, verdict, at string) error {
		t, err := parseTime(at, key.Digest)
		if err != nil {
			return err
		}
		ctx, err := sc.context(l.Command)
		if err != nil {
			return err
		}
		sc.entries = append(sc.entries, Entry{Kind: kind, Release: l.Lock.ReleaseVersion, ClusterUID: l.ClusterUID, Context: ctx,
			Recovered: l.Recovered, Verdict: verdict, Digest: key.Digest, Command: l.Command.Digest, Time: t.UTC().Format(time.RFC3339), at: t})
		return nil
	}
	rcs, err := st.ListIndex(evidence.IndexReceipts)
	if err != nil {
		return nil, err
	}
	done := map[digest.Digest]bool{}
	for _, ie := range rcs {
		var l line
		if err := sc.load(ie.Descriptor, evidence.MediaTypeReceipt, &l); err != nil {
			return nil, err
		}
		if err := add(KindReceipt, ie.Descriptor, &l, "", l.FinishedAt); err != nil {
			return nil, err
		}
		sc.receipts = append(sc.receipts, receipt{desc: ie.Descriptor, release: l.Lock.ReleaseVersion, cluster: l.ClusterUID,
			finishedAt: l.FinishedAt, at: sc.entries[len(sc.entries)-1].at})
		done[ie.Key] = true
	}
	for _, k := range []struct{ index, mediaType, kind string }{
		{evidence.IndexPreflights, evidence.MediaTypePreflight, KindPreflight},
		{evidence.IndexLiveAudits, evidence.MediaTypeLiveAudit, KindLiveAudit},
	} {
		es, err := st.ListIndex(k.index)
		if err != nil {
			return nil, err
		}
		for _, ie := range es {
			var l line
			if err := sc.load(ie.Descriptor, k.mediaType, &l); err != nil {
				return nil, err
			}
			verdict := ""
			if k.kind == KindLiveAudit {
				verdict = liveVerdict(&l)
			}
			l.Recovered = false
			if err := add(k.kind, ie.Descriptor, &l, verdict, l.FinishedAt); err != nil {
				return nil, err
			}
		}
	}
	ins, err := st.ListIndex(evidence.IndexIntents)
	if err != nil {
		return nil, err
	}
	for _, ie := range ins {
		if done[ie.Key] {
			continue
		}
		var l, p line
		if err := sc.load(ie.Descriptor, evidence.MediaTypeIntent, &l); err != nil {
			return nil, err
		}
		if err := sc.load(l.Preflight, evidence.MediaTypePreflight, &p); err != nil {
			return nil, err
		}
		l.Lock = p.Lock
		if err := add(KindUnfinished, ie.Descriptor, &l, "may be partial", l.CreatedAt); err != nil {
			return nil, err
		}
	}
	sort.SliceStable(sc.entries, func(i, j int) bool {
		a, b := sc.entries[i], sc.entries[j]
		if !a.at.Equal(b.at) {
			return a.at.After(b.at)
		}
		return a.Digest > b.Digest
	})
	sort.SliceStable(sc.receipts, func(i, j int) bool {
		a, b := sc.receipts[i], sc.receipts[j]
		if !a.at.Equal(b.at) {
			return a.at.Before(b.at)
		}
		return a.desc.Digest < b.desc.Digest
	})
	return sc, nil
}

func liveVerdict(la *line) string {
	n := 0
	for _, v := range la.Verdicts {
		if v.Verdict == evidence.VerdictConverged {
			n++
		}
	}
	if la.Converged {
		return "converged"
	}
	return fmt.Sprintf("drift %d/%d", len(la.Verdicts)-n, len(la.Verdicts))
}
