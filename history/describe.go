package history

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
	"github.com/qinglong/ql3/verdict/plan"
)

// Ref names another receipt of the same cluster.
type Ref struct {
	Receipt    digest.Digest `json:"receipt"`
	Release    string        `json:"release"`
	FinishedAt string        `json:"finishedAt"`
}

// Description is a human summary of one root record.
type Description struct {
	Kind          string                 `json:"kind"`
	Digest        digest.Digest          `json:"digest"`
	Command       digest.Digest          `json:"command"`
	Release       string                 `json:"release"`
	CatalogCommit string                 `json:"catalogCommit"`
	ClusterUID    string                 `json:"clusterUid"`
	Context       string                 `json:"context"`
	KubectlDigest digest.Digest          `json:"kubectlDigest"`
	StartedAt     string                 `json:"startedAt,omitempty"`
	FinishedAt    string                 `json:"finishedAt"` // createdAt for an intent
	Recovered     bool                   `json:"recovered"`
	Preflight     digest.Digest          `json:"preflight,omitempty"`
	Intent        digest.Digest          `json:"intent,omitempty"`
	Receipt       digest.Digest          `json:"receipt,omitempty"` // a live audit's receipt; an intent's receipt when it has one
	Objects       []evidence.LiveObject  `json:"objects,omitempty"`
	Supersedes    *Ref                   `json:"supersedes,omitempty"`
	SupersededBy  *Ref                   `json:"supersededBy,omitempty"`
	Plan          *evidence.Plan         `json:"plan,omitempty"`
	Converged     bool                   `json:"converged,omitempty"`
	Verdicts      []evidence.LiveVerdict `json:"verdicts,omitempty"`
	// Order is what ordered the store's story (OrderLog or OrderRecords); with a log, LogIndex
	// is the leaf that published this record and Unsigned marks it in the unsigned tail.
	Order    string    `json:"order"`
	Log      *LogState `json:"log,omitempty"`
	LogIndex *int64    `json:"logIndex,omitempty"`
	Unsigned bool      `json:"unsigned,omitempty"`
}

// Describe summarises the root record d of st: a published receipt, preflight report, live-audit
// report or apply intent. Any other digest is refused with DESCRIBE_NOT_ROOT. The log's
// signatures are not checked (DescribeWith does, given a verifier).
func Describe(st *store.Store, d digest.Digest) (*Description, error) {
	return DescribeWith(st, d, Options{})
}

// DescribeWith is Describe judging the log's checkpoints with o.LogVerifier, as HistoryWith.
func DescribeWith(st *store.Store, d digest.Digest, o Options) (*Description, error) {
	if _, err := evidence.ParseDigest(string(d)); err != nil {
		return nil, err
	}
	b, err := st.Get(d)
	if refuse.CodeOf(err) == store.CodeObjectNotFound {
		return nil, refuse.New(CodeNotRoot, "%s names no object of store %s", d, st.Root())
	}
	if err != nil {
		return nil, err
	}
	var probe struct {
		Schema string `json:"schema"`
	}
	if evidence.Validate(b) != nil || json.Unmarshal(b, &probe) != nil {
		return nil, refuse.New(CodeNotRoot, "%s is a blob, not a root record", d)
	}
	sc := &scanned{st: st, contexts: map[digest.Digest]string{}, strict: true}
	desc := func(mt string) evidence.Descriptor {
		return evidence.Descriptor{MediaType: mt, Digest: d, Size: int64(len(b))}
	}
	published := func(kind string, key digest.Digest) error {
		got, ok, err := st.GetIndex(kind, key)
		if err != nil {
			return err
		}
		if !ok || got.Digest != d {
			return refuse.New(CodeNotRoot, "%s is not published in index %s: not a root record", d, kind)
		}
		return nil
	}
	out := &Description{Digest: d}
	switch probe.Schema {
	case evidence.SchemaReceipt:
		var rc evidence.Receipt
		if err := sc.load(desc(evidence.MediaTypeReceipt), evidence.MediaTypeReceipt, &rc); err != nil {
			return nil, err
		}
		if err := published(evidence.IndexReceipts, rc.Command.Digest); err != nil {
			return nil, err
		}
		out.Kind, out.Command, out.Release, out.CatalogCommit = KindReceipt, rc.Command.Digest, rc.Lock.ReleaseVersion, rc.Lock.CatalogCommit
		out.ClusterUID, out.KubectlDigest, out.StartedAt, out.FinishedAt = rc.ClusterUID, rc.KubectlDigest, rc.StartedAt, rc.FinishedAt
		out.Recovered, out.Preflight, out.Intent, out.Objects = rc.Recovered, rc.Preflight.Digest, rc.Intent.Digest, rc.Objects
		if out.Context, err = sc.context(rc.Command); err != nil {
			return nil, err
		}
		if err := supersession(st, out); err != nil {
			return nil, err
		}
	case evidence.SchemaPreflight:
		var p evidence.Preflight
		if err := sc.load(desc(evidence.MediaTypePreflight), evidence.MediaTypePreflight, &p); err != nil {
			return nil, err
		}
		if err := published(evidence.IndexPreflights, d); err != nil {
			return nil, err
		}
		out.Kind, out.Command, out.Release, out.CatalogCommit = KindPreflight, p.Command.Digest, p.Lock.ReleaseVersion, p.Lock.CatalogCommit
		out.ClusterUID, out.StartedAt, out.FinishedAt = p.ClusterUID, p.StartedAt, p.FinishedAt
		if out.Context, err = sc.context(p.Command); err != nil {
			return nil, err
		}
		if out.KubectlDigest, err = kubectlOf(sc, p.Command); err != nil {
			return nil, err
		}
		if p.Plan != nil {
			var pl evidence.Plan
			if err := sc.load(*p.Plan, evidence.MediaTypePlan, &pl); err != nil {
				return nil, err
			}
			out.Plan = &pl
		}
	case evidence.SchemaLiveAudit:
		var la evidence.LiveAudit
		if err := sc.load(desc(evidence.MediaTypeLiveAudit), evidence.MediaTypeLiveAudit, &la); err != nil {
			return nil, err
		}
		if err := published(evidence.IndexLiveAudits, d); err != nil {
			return nil, err
		}
		out.Kind, out.Command, out.Release, out.CatalogCommit = KindLiveAudit, la.Command.Digest, la.Lock.ReleaseVersion, la.Lock.CatalogCommit
		out.ClusterUID, out.KubectlDigest, out.StartedAt, out.FinishedAt = la.ClusterUID, la.KubectlDigest, la.StartedAt, la.FinishedAt
		out.Receipt, out.Converged, out.Verdicts = la.Receipt.Digest, la.Converged, la.Verdicts
		if out.Context, err = sc.context(la.Command); err != nil {
			return nil, err
		}
	case evidence.SchemaIntent:
		var in evidence.Intent
		if err := sc.load(desc(evidence.MediaTypeIntent), evidence.MediaTypeIntent, &in); err != nil {
			return nil, err
		}
		if err := published(evidence.IndexIntents, in.Command.Digest); err != nil {
			return nil, err
		}
		var p evidence.Preflight
		if err := sc.load(in.Preflight, evidence.MediaTypePreflight, &p); err != nil {
			return nil, err
		}
		out.Kind, out.Command, out.Release, out.CatalogCommit = KindUnfinished, in.Command.Digest, p.Lock.ReleaseVersion, p.Lock.CatalogCommit
		out.ClusterUID, out.FinishedAt, out.Preflight = in.ClusterUID, in.CreatedAt, in.Preflight.Digest
		if out.Context, err = sc.context(in.Command); err != nil {
			return nil, err
		}
		if out.KubectlDigest, err = kubectlOf(sc, in.Command); err != nil {
			return nil, err
		}
		if rd, ok, err := st.GetIndex(evidence.IndexReceipts, in.Command.Digest); err != nil {
			return nil, err
		} else if ok {
			out.Kind, out.Receipt = "apply-intent", rd.Digest
		}
	default:
		return nil, refuse.New(CodeNotRoot, "%s is a record of schema %s, not a root record", d, refuse.Ident(probe.Schema))
	}
	lg, err := readLog(st, o)
	if err != nil {
		return nil, err
	}
	out.Order = OrderRecords
	if lg != nil {
		kind := out.Kind
		if kind == "apply-intent" {
			kind = KindUnfinished
		}
		idx, err := lg.place(kind, d)
		if err != nil {
			return nil, err
		}
		out.Order, out.Log, out.LogIndex, out.Unsigned = OrderLog, &lg.state, &idx, idx >= lg.state.Checkpoint
	}
	return out, nil
}

func kubectlOf(sc *scanned, cmd evidence.Descriptor) (digest.Digest, error) {
	var c evidence.Command
	if err := sc.load(cmd, evidence.MediaTypeCommand, &c); err != nil {
		return "", err
	}
	return c.Kubectl.Digest, nil
}

// supersession fills what a receipt superseded (the last receipt of the same cluster published
// before it that shares an object with it) and the latest that superseded it (the last one
// published after it that shares an object), in the publication order plan.Lineage derives from
// the records, never from their times.
func supersession(st *store.Store, out *Description) error {
	es, err := st.ListIndex(evidence.IndexReceipts)
	if err != nil {
		return err
	}
	rcs := make([]evidence.Descriptor, len(es))
	for i, e := range es {
		rcs[i] = e.Descriptor
	}
	lin, err := plan.LoadLineage(st, rcs)
	if err != nil {
		return err
	}
	ref := func(p plan.Published) *Ref {
		return &Ref{Receipt: p.Desc.Digest, Release: p.Receipt.Lock.ReleaseVersion, FinishedAt: p.Receipt.FinishedAt}
	}
	if before := lin.Supersedes(out.Digest); len(before) > 0 {
		out.Supersedes = ref(before[len(before)-1])
	}
	if after := lin.SupersededBy(out.Digest); len(after) > 0 {
		out.SupersededBy = ref(after[len(after)-1])
	}
	return nil
}

// WriteText prints the description for a human.
func (d *Description) WriteText(w io.Writer) {
	writeLogLine(w, d.Order, d.Log)
	line := func(k, v string) {
		if v != "" {
			fmt.Fprintf(w, "%-15s %s\n", k+":", v)
		}
	}
	line("kind", d.Kind)
	line("digest", string(d.Digest))
	line("release", d.Release)
	line("catalog commit", d.CatalogCommit)
	line("cluster", d.ClusterUID)
	line("context", refuse.Ident(d.Context))
	line("kubectl", string(d.KubectlDigest))
	line("command", string(d.Command))
	line("started", d.StartedAt)
	line("when", d.FinishedAt)
	if d.Kind == KindReceipt || d.Kind == KindUnfinished {
		line("recovered", fmt.Sprint(d.Recovered))
	}
	line("preflight", string(d.Preflight))
	line("intent", string(d.Intent))
	line("receipt", string(d.Receipt))
	if d.LogIndex != nil {
		leaf := fmt.Sprint(*d.LogIndex)
		if d.Unsigned {
			leaf += " (in the unsigned tail)"
		}
		line("log leaf", leaf)
	}
	if d.Kind == KindUnfinished {
		line("state", "apply intent without receipt: the cluster may be partially applied; rerun its apply command to recover")
	}
	if d.Kind == KindReceipt {
		sup, by := "nothing (the first receipt of this cluster in the store)", "nothing (the latest receipt of this cluster in the store)"
		if d.Supersedes != nil {
			sup = fmt.Sprintf("%s release %s (%s)", d.Supersedes.Receipt, d.Supersedes.Release, d.Supersedes.FinishedAt)
		}
		if d.SupersededBy != nil {
			by = fmt.Sprintf("%s release %s (%s)", d.SupersededBy.Receipt, d.SupersededBy.Release, d.SupersededBy.FinishedAt)
		}
		line("supersedes", sup)
		line("superseded by", by)
		fmt.Fprintf(w, "objects:        %d\n", len(d.Objects))
		for _, o := range d.Objects {
			fmt.Fprintf(w, "  %s %s uid %s resourceVersion %s\n", o.Kind, name(o.Namespace, o.Name), o.UID, o.ResourceVersion)
		}
	}
	if d.Kind == KindLiveAudit {
		n := 0
		for _, v := range d.Verdicts {
			if v.Verdict == evidence.VerdictConverged {
				n++
			}
		}
		line("verdict", map[bool]string{true: "converged", false: "DRIFT"}[d.Converged])
		fmt.Fprintf(w, "objects:        %d, %d converged\n", len(d.Verdicts), n)
		for _, v := range d.Verdicts {
			extra := ""
			if v.Path != "" {
				extra = " at " + v.Path
			}
			if v.Manager != "" {
				extra += " (manager " + v.Manager + ")"
			}
			fmt.Fprintf(w, "  %s %s: %s%s\n", v.Kind, name(v.Namespace, v.Name), v.Verdict, extra)
		}
	}
	if d.Kind == KindPreflight {
		if d.Plan == nil {
			line("plan", "none (no earlier receipt of this cluster in the store)")
			return
		}
		plan.WriteText(w, d.Plan)
	}
}

func name(ns, n string) string {
	if ns == "" {
		return n
	}
	return ns + "/" + n
}
