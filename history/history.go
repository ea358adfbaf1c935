// Package history reads a store offline and tells a release's life on its clusters (docs/issues.md#issue-9):
// History lists every receipt, preflight, live audit and unfinished apply, newest first, and
// Describe summarises one root record for a human. Both only read: they open no network connection,
// run no program and write nothing. Every object they read is re-hashed by the store and every
// record is decoded under the record rules, so a tampered store is refused, not summarised.
package history

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/deploylog"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
	"github.com/qinglong/ql3/verdict/order"
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
	// KindPruned: a tombstone leaf of the deployment log, by which store gc dropped a root; its
	// record is gone, so only its kind and digest are shown (Verdict "dropped <kind>").
	KindPruned = "pruned"
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
	// LogIndex is the index of the leaf that published the record (stores with a log only);
	// Unsigned marks a leaf after the log's last checkpoint.
	LogIndex *int64 `json:"logIndex,omitempty"`
	Unsigned bool   `json:"unsigned,omitempty"`
	at       time.Time
	after    []digest.Digest // the records this one names, published before it (order.Node.After)
}

// Report is History's JSON output.
type Report struct {
	Schema  string `json:"schema"`
	Store   string `json:"store"`
	Cluster string `json:"cluster,omitempty"`
	// Order is what ordered the entries: OrderLog (the log's leaf index) or OrderRecords.
	Order   string    `json:"order"`
	Log     *LogState `json:"log,omitempty"`
	Entries []Entry   `json:"entries"`
}

// Filter narrows the history.
type Filter struct {
	Cluster string // only this kube-system uid; "" for every cluster
}

// History returns every receipt, preflight report, live-audit report and unfinished apply of st
// (of f.Cluster only, when set), newest first: by log index when the store has a deployment log
// (which must verify), else in the order the records prove. The log's signatures are not
// checked (HistoryWith does, given a verifier).
func History(st *store.Store, f Filter) (*Report, error) { return HistoryWith(st, f, Options{}) }

// HistoryWith is History judging the log's checkpoints with o.LogVerifier: the story says up to
// which checkpoint it is signed (and cosigned), and marks the leaves after it unsigned.
func HistoryWith(st *store.Store, f Filter, o Options) (*Report, error) {
	if f.Cluster != "" && (len(f.Cluster) > 256 || strings.ContainsAny(f.Cluster, " \t\r\n\x00/")) {
		return nil, refuse.New(CodeClusterFilter, "cluster filter %s is not a kube-system uid", refuse.Ident(f.Cluster))
	}
	sc, lg, err := scanStory(st, o)
	if err != nil {
		return nil, err
	}
	rep := &Report{Schema: SchemaHistory, Store: st.Root(), Cluster: f.Cluster, Order: OrderRecords, Entries: []Entry{}}
	if lg == nil {
		sc.byRecords()
	} else {
		rep.Order, rep.Log = OrderLog, &lg.state
		for i := range sc.entries {
			e := &sc.entries[i]
			e.Unsigned = *e.LogIndex >= lg.state.Checkpoint
		}
		// Each root store gc dropped is a line of the story too: its tombstone leaf. Its record
		// (and so its cluster) is gone: shown without a cluster filter only.
		if f.Cluster == "" {
			for _, tb := range lg.tombstones {
				idx := tb.index
				sc.entries = append(sc.entries, Entry{Time: "-", Kind: KindPruned, Release: "-", ClusterUID: "-",
					Verdict: "dropped " + string(tb.leaf.Dropped), Digest: tb.leaf.Record, LogIndex: &idx, Unsigned: idx >= lg.state.Checkpoint})
			}
		}
		// Newest first by leaf index: the log's commit order, not the records' times.
		sc.entries = byLeaf(sc.entries, lg.state.Size)
	}
	// Filtered in place: the lines are this call's own, a few hundred bytes each.
	kept := sc.entries[:0]
	for _, e := range sc.entries {
		if f.Cluster == "" || e.ClusterUID == f.Cluster {
			kept = append(kept, e)
		}
	}
	if len(kept) > 0 {
		rep.Entries = kept
	}
	return rep, nil
}

// byLeaf is entries ordered newest first by leaf index. Each line is its own leaf, so the entries
// are placed by index, without comparing (a sort moved the entries, a few hundred bytes each,
// about n log n times); two lines naming one leaf, which the log's check rules out, are sorted
// instead, in place.
func byLeaf(entries []Entry, size int64) []Entry {
	at := make([]int32, size) // 1 + the position of the leaf's entry, 0: none
	for i, e := range entries {
		li := *e.LogIndex
		if li < 0 || li >= size || at[li] != 0 {
			slices.SortStableFunc(entries, func(a, b Entry) int { return cmp.Compare(*b.LogIndex, *a.LogIndex) })
			return entries
		}
		at[li] = int32(i + 1)
	}
	out := make([]Entry, 0, len(entries))
	for li := size - 1; li >= 0; li-- {
		if at[li] != 0 {
			out = append(out, entries[at[li]-1])
		}
	}
	return out
}

// WriteText prints the history as aligned columns, newest first.
func (r *Report) WriteText(w io.Writer) error {
	writeLogLine(w, r.Order, r.Log)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	// The LEAF column only with a log: a store without one keeps its columns.
	head := "TIME\tKIND\tRELEASE\tCLUSTER\tCONTEXT\tRECOVERED\tVERDICT\tDIGEST"
	if r.Log != nil {
		head = "LEAF\t" + head
	}
	fmt.Fprintln(tw, head)
	for _, e := range r.Entries {
		rec := "-"
		if e.Kind == KindReceipt || e.Kind == KindUnfinished {
			rec = fmt.Sprint(e.Recovered)
		}
		v := e.Verdict
		if v == "" {
			v = "-"
		}
		if e.LogIndex != nil {
			leaf := fmt.Sprint(*e.LogIndex)
			if e.Unsigned {
				leaf += " unsigned"
			}
			fmt.Fprintf(tw, "%s\t", leaf)
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

// scanned is everything History and Describe need from the index.
type scanned struct {
	entries  []Entry
	mu       sync.Mutex
	contexts map[digest.Digest]string // guarded by mu: the records are read by several goroutines
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
	return sc.loadBytes(d, mediaType, nil, v)
}

// loadBytes is load of the record's bytes b when the caller holds them already, read and
// hashed to d.Digest by the store (the log's check, store.LogPublication, which lends them for
// the call); nil b is read by View.
func (sc *scanned) loadBytes(d evidence.Descriptor, mediaType string, b []byte, v any) error {
	if d.MediaType != mediaType {
		return refuse.New(CodeRecordInvalid, "index names %s with media type %s, want %s", d.Digest, refuse.Ident(d.MediaType), mediaType)
	}
	if b == nil {
		// Read into View's reused buffer: the decoders copy every string they keep.
		return sc.st.View(d.Digest, func(b []byte) error { return sc.decode(d, mediaType, b, v) })
	}
	return sc.decode(d, mediaType, b, v)
}

// decode is loadBytes of the bytes b of the record d, which it keeps nothing of: they may be lent
// (View).
func (sc *scanned) decode(d evidence.Descriptor, mediaType string, b []byte, v any) error {
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
	// is the record the ceremony wrote; the few members a line shows are read by one pass of the
	// scanner of fields.go, which checks the JSON grammar of the whole record, and the schema is
	// checked. The full record rules are the auditor's (ql3 audit), and Describe applies them.
	f, ok := v.(fields)
	if !ok {
		return refuse.New(CodeRecordInvalid, "record %s: no listing shape for %s", d.Digest, refuse.Ident(mediaType))
	}
	if err := f.decodeFields(b); err != nil {
		return refuse.Wrap(CodeRecordInvalid, err, "record %s", d.Digest)
	}
	if want, _ := evidence.RecordSchema(mediaType); f.schema() != want {
		return refuse.New(CodeRecordInvalid, "record %s is not a %s record", d.Digest, want)
	}
	return nil
}

// fields is a narrow shape a listing reads from a record.
type fields interface {
	decodeFields(b []byte) error
	schema() string
}

// line is the narrow shape of every root record a history line reads.
type line struct {
	Schema     string
	Command    evidence.Descriptor
	Preflight  evidence.Descriptor
	Lock       struct{ ReleaseVersion string }
	ClusterUID string
	Recovered  bool
	FinishedAt string
	CreatedAt  string
	Converged  bool
	Verdicts   []struct{ Verdict string }
	Receipt    evidence.Descriptor  // a live audit's
	Intent     evidence.Descriptor  // a receipt's
	Plan       *evidence.Descriptor // a preflight's
	Previous   evidence.Descriptor  // a plan's
}

func (l *line) schema() string { return l.Schema }

func (l *line) decodeFields(b []byte) error {
	var seen uint
	return scanMembers(b, func(name []byte, raw []byte) error {
		switch string(name) {
		case "schema":
			return once(&seen, 0, name, func() error { return decodeString(raw, &l.Schema) })
		case "command":
			return once(&seen, 1, name, func() error { return decodeDescriptor(raw, &l.Command) })
		case "preflight":
			return once(&seen, 2, name, func() error { return decodeDescriptor(raw, &l.Preflight) })
		case "lock":
			return once(&seen, 3, name, func() error {
				var seen uint
				return scanMembers(raw, func(name []byte, raw []byte) error {
					if string(name) == "releaseVersion" {
						return once(&seen, 0, name, func() error { return decodeString(raw, &l.Lock.ReleaseVersion) })
					}
					return nil
				})
			})
		case "clusterUid":
			return once(&seen, 4, name, func() error { return decodeString(raw, &l.ClusterUID) })
		case "recovered":
			return once(&seen, 5, name, func() error { return decodeBool(raw, &l.Recovered) })
		case "finishedAt":
			return once(&seen, 6, name, func() error { return decodeString(raw, &l.FinishedAt) })
		case "createdAt":
			return once(&seen, 7, name, func() error { return decodeString(raw, &l.CreatedAt) })
		case "converged":
			return once(&seen, 8, name, func() error { return decodeBool(raw, &l.Converged) })
		case "verdicts":
			return once(&seen, 9, name, func() error {
				return scanElements(raw, func(raw []byte) error {
					var v struct{ Verdict string }
					var seen uint
					err := scanMembers(raw, func(name []byte, raw []byte) error {
						if string(name) == "verdict" {
							return once(&seen, 0, name, func() error { return decodeString(raw, &v.Verdict) })
						}
						return nil
					})
					l.Verdicts = append(l.Verdicts, v)
					return err
				})
			})
		case "receipt":
			return once(&seen, 10, name, func() error { return decodeDescriptor(raw, &l.Receipt) })
		case "intent":
			return once(&seen, 11, name, func() error { return decodeDescriptor(raw, &l.Intent) })
		case "plan":
			return once(&seen, 12, name, func() error { l.Plan = new(evidence.Descriptor); return decodeDescriptor(raw, l.Plan) })
		case "previous":
			return once(&seen, 13, name, func() error { return decodeDescriptor(raw, &l.Previous) })
		}
		return nil
	})
}

type commandLine struct {
	Schema     string
	Kubeconfig struct{ Context string }
}

func (c *commandLine) schema() string { return c.Schema }

func (c *commandLine) decodeFields(b []byte) error {
	var seen uint
	return scanMembers(b, func(name []byte, raw []byte) error {
		switch string(name) {
		case "schema":
			return once(&seen, 0, name, func() error { return decodeString(raw, &c.Schema) })
		case "kubeconfig":
			return once(&seen, 1, name, func() error {
				var seen uint
				return scanMembers(raw, func(name []byte, raw []byte) error {
					if string(name) == "context" {
						return once(&seen, 0, name, func() error { return decodeString(raw, &c.Kubeconfig.Context) })
					}
					return nil
				})
			})
		}
		return nil
	})
}

// context returns the kubeconfig context of the command record d (read once per command).
func (sc *scanned) context(d evidence.Descriptor) (string, error) {
	sc.mu.Lock()
	c, ok := sc.contexts[d.Digest]
	sc.mu.Unlock()
	if ok {
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
	sc.mu.Lock()
	sc.contexts[d.Digest] = ctx
	sc.mu.Unlock()
	return ctx, nil
}

// readContexts sets the kubeconfig context of each job's line from its command record, read once
// per command, all of them together (store.ViewAll); a job whose command record does not read
// takes that refusal as its own error. A job already refused is left as it is.
func (sc *scanned) readContexts(jobs []*job) {
	var want []evidence.Descriptor
	at := map[digest.Digest]int{} // want's index of each command
	for _, j := range jobs {
		if d := j.command; j.err == nil {
			if _, ok := at[d.Digest]; !ok {
				at[d.Digest] = len(want)
				want = append(want, d)
			}
		}
	}
	ctxs := make([]string, len(want))
	errs := make([]error, len(want))
	var ds []digest.Digest
	var of []int // want's index of each of ds
	for i, d := range want {
		if d.MediaType != evidence.MediaTypeCommand {
			errs[i] = refuse.New(CodeRecordInvalid, "index names %s with media type %s, want %s", d.Digest, refuse.Ident(d.MediaType), evidence.MediaTypeCommand)
			continue
		}
		ds, of = append(ds, d.Digest), append(of, i)
	}
	for k, err := range sc.st.ViewAll(ds, func(k int, b []byte) error {
		var c commandLine
		if err := sc.decode(want[of[k]], evidence.MediaTypeCommand, b, &c); err != nil {
			return err
		}
		ctxs[of[k]] = c.Kubeconfig.Context
		return nil
	}) {
		errs[of[k]] = err
	}
	for _, j := range jobs {
		if j.err != nil {
			continue
		}
		i := at[j.command.Digest]
		if errs[i] != nil {
			j.err = errs[i]
			continue
		}
		j.entry.Context = ctxs[i]
	}
}

// job is one root record a listing reads.
type job struct {
	kind, mediaType string
	key             digest.Digest // its index entry's key
	leaf            int64         // the leaf that published it, from the log's check
	desc            evidence.Descriptor
	raw             []byte              // the record's bytes from the log's check: lent for its call, an intent's copied; nil: read by View
	command         evidence.Descriptor // the record's command record, whose context the line shows
	entry           Entry
	err             error
}

// indexKind is one index a listing reads: its records' media type, their lines' kind, and the
// kind of the log's leaves that publish them.
type indexKind struct {
	index, mediaType, kind string
	leaf                   deploylog.Kind
}

// kinds are the indexes a listing reads, in the order its errors are reported: receipts,
// preflights, live audits, intents (each by key), so that a store with several bad records
// always names the same one.
var kinds = []indexKind{
	{evidence.IndexReceipts, evidence.MediaTypeReceipt, KindReceipt, deploylog.KindReceipt},
	{evidence.IndexPreflights, evidence.MediaTypePreflight, KindPreflight, deploylog.KindPreflight},
	{evidence.IndexLiveAudits, evidence.MediaTypeLiveAudit, KindLiveAudit, deploylog.KindLiveAudit},
	{evidence.IndexIntents, evidence.MediaTypeIntent, KindUnfinished, deploylog.KindIntent},
}

// scanStory reads the root records and, when the store has one, the verified log. With a log,
// the records are those the log's check read (store.ReadLogStoryWith hands each publication's
// index entry and record bytes over as it reads them, on its workers, where they are decoded):
// each file is read once. Without a log, or when the log does not verify, the records are
// listed and read as before (scan), and that reading's refusal comes first, as it always has:
// a record history cannot read is refused with its own code whatever the log says.
func scanStory(st *store.Store, o Options) (*scanned, *logStory, error) {
	sc := &scanned{st: st, contexts: map[digest.Digest]string{}}
	var mu sync.Mutex
	var jobs []*job
	lg, err := readLogWith(st, o, func(p store.LogPublication) {
		k := slices.IndexFunc(kinds, func(k indexKind) bool { return k.leaf == p.Kind })
		if k < 0 {
			return
		}
		j := &job{kind: kinds[k].kind, mediaType: kinds[k].mediaType, key: p.Key, leaf: p.Leaf, desc: p.Entry, raw: p.Record}
		// An intent is a line only without its receipt, which may not be read yet: it is read
		// once every publication is known (holding a copy of its bytes, which are only lent
		// for this call, instead of reading them again).
		if j.kind != KindUnfinished {
			j.err = sc.read(j)
			j.raw = nil
		} else {
			j.raw = slices.Clone(p.Record)
		}
		mu.Lock()
		jobs = append(jobs, j)
		mu.Unlock()
	})
	if err != nil || lg == nil {
		sc, serr := scan(st)
		if serr != nil {
			return nil, nil, serr
		}
		return sc, nil, err
	}
	done := map[digest.Digest]bool{}
	for _, j := range jobs {
		if j.kind == KindReceipt {
			done[j.key] = true
		}
	}
	var intents []*job
	for _, j := range jobs {
		if j.kind == KindUnfinished && !done[j.key] {
			intents = append(intents, j)
		}
	}
	readAll(sc, intents)
	var lines []*job
	for _, j := range jobs {
		if j.kind != KindUnfinished || !done[j.key] {
			lines = append(lines, j)
		}
	}
	sc.readContexts(lines)
	// The lines are placed by leaf (HistoryWith), so the jobs are not sorted: of the records that
	// do not read, the one first in the listing's order (kinds, each by key) is named.
	rank := func(kind string) int {
		return slices.IndexFunc(kinds, func(k indexKind) bool { return k.kind == kind })
	}
	var failed *job
	sc.entries = make([]Entry, 0, len(jobs))
	leaves := make([]int64, len(jobs))
	for i, j := range jobs {
		switch {
		case j.kind == KindUnfinished && done[j.key]:
		case j.err != nil:
			if failed == nil || cmp.Or(cmp.Compare(rank(j.kind), rank(failed.kind)), strings.Compare(string(j.key), string(failed.key))) < 0 {
				failed = j
			}
		default:
			leaves[i] = j.leaf
			j.entry.LogIndex = &leaves[i]
			sc.entries = append(sc.entries, j.entry)
		}
	}
	if failed != nil {
		return nil, nil, failed.err
	}
	return sc, lg, nil
}

// readAll reads every job, on as many goroutines as there are cores: each record is read,
// re-hashed and scanned independently of the others.
func readAll(sc *scanned, jobs []*job) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(jobs)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(jobs) {
					return
				}
				jobs[i].err = sc.read(jobs[i])
			}
		})
	}
	wg.Wait()
}

func scan(st *store.Store) (*scanned, error) {
	sc := &scanned{st: st, contexts: map[digest.Digest]string{}}
	// The four indexes are listed, then the records read (readAll). Errors are reported in the
	// order of the sequential listing (kinds, each by key).
	lists := make([][]store.IndexEntry, len(kinds))
	errs := make([]error, len(kinds))
	var wg sync.WaitGroup
	for i, k := range kinds {
		wg.Go(func() { lists[i], errs[i] = st.ListIndex(k.index) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	done := map[digest.Digest]bool{}
	for _, ie := range lists[0] {
		done[ie.Key] = true
	}
	var jobs []*job
	for i, k := range kinds {
		for _, ie := range lists[i] {
			if k.kind == KindUnfinished && done[ie.Key] {
				continue
			}
			jobs = append(jobs, &job{kind: k.kind, mediaType: k.mediaType, key: ie.Key, desc: ie.Descriptor})
		}
	}
	readAll(sc, jobs)
	sc.readContexts(jobs)
	sc.entries = make([]Entry, 0, len(jobs))
	for _, j := range jobs {
		if j.err != nil {
			return nil, j.err
		}
		sc.entries = append(sc.entries, j.entry)
	}
	return sc, nil
}

// byRecords orders the entries newest first in the publication order the records prove
// (verdict/order), not by their times: the order of a store without a log (with one, the leaf
// index orders them and this is not computed).
func (sc *scanned) byRecords() {
	nodes := make([]order.Node, len(sc.entries))
	for i, e := range sc.entries {
		nodes[i] = order.Node{Digest: e.Digest, After: e.after, Claimed: e.at}
	}
	pub := order.Publication(nodes)
	out := make([]Entry, len(sc.entries))
	for k, i := range pub {
		out[len(pub)-1-k] = sc.entries[i]
	}
	sc.entries = out
}

// read reads the root record of j, and for an unfinished apply its preflight, into j's entry.
func (sc *scanned) read(j *job) error {
	var l line
	if err := sc.loadBytes(j.desc, j.mediaType, j.raw, &l); err != nil {
		return err
	}
	at, verdict := l.FinishedAt, ""
	switch j.kind {
	case KindLiveAudit:
		verdict = liveVerdict(&l)
		l.Recovered = false
	case KindPreflight:
		l.Recovered = false
		if l.Plan != nil {
			var pl line
			if err := sc.load(*l.Plan, evidence.MediaTypePlan, &pl); err != nil {
				return err
			}
			l.Previous = pl.Previous
		}
	case KindUnfinished:
		var p line
		if err := sc.load(l.Preflight, evidence.MediaTypePreflight, &p); err != nil {
			return err
		}
		l.Lock = p.Lock
		at, verdict = l.CreatedAt, "may be partial"
	}
	t, err := parseTime(at, j.desc.Digest)
	if err != nil {
		return err
	}
	// The kubeconfig context is read from the command record once every line is read
	// (readContexts): the command records of a listing are read together.
	j.command = l.Command
	j.entry = Entry{Kind: j.kind, Release: l.Lock.ReleaseVersion, ClusterUID: l.ClusterUID,
		Recovered: l.Recovered, Verdict: verdict, Digest: j.desc.Digest, Command: l.Command.Digest, Time: t.UTC().Format(time.RFC3339), at: t}
	for _, d := range []evidence.Descriptor{l.Preflight, l.Intent, l.Receipt, l.Previous} {
		if d.Digest != "" {
			j.entry.after = append(j.entry.after, d.Digest)
		}
	}
	return nil
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
