package history

import (
	"fmt"
	"io"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/deploylog"
	"github.com/qinglong/ql3/deploylog/policy"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
)

// Order sources: what ordered the output.
const (
	// OrderLog: the store's deployment log, by leaf index (its commit order is authoritative).
	OrderLog = "log"
	// OrderRecords: a store without a log, in the order the records' names prove (verdict/order).
	OrderRecords = "records"
)

// Options say how History and Describe judge the log's checkpoints.
type Options struct {
	// LogVerifier checks every stored checkpoint's signatures as ql3 log verify does:
	// deploylog.KeyVerifier (--log-key) or policy.Verifier (--policy, the witness quorum from the
	// cosignatures kept beside each checkpoint). A checkpoint it refuses refuses the story. Nil:
	// the checkpoints are checked against the leaves only, and the story says so.
	LogVerifier deploylog.CheckpointVerifier
}

// LogState says how much of the story the log's checkpoints cover.
type LogState struct {
	Origin string `json:"origin"`
	Size   int64  `json:"size"` // leaves in the log
	// Checkpoint is the signed size: with a verifier, the tree size of the largest checkpoint it
	// trusts; without, of the largest stored checkpoint, whose signatures were not checked
	// (SignatureChecked false). 0: none. Its tree was recomputed from the leaves either way.
	Checkpoint       int64 `json:"checkpoint"`
	SignatureChecked bool  `json:"signatureChecked"`
	Cosignatures     int   `json:"cosignatures"` // witnesses whose cosignatures are kept beside it
	UnsignedTail     int64 `json:"unsignedTail"` // leaves after Checkpoint
	// CheckedBy is what checked the signatures: CheckedByLogKey or CheckedByPolicy ("" without).
	CheckedBy string `json:"checkedBy,omitempty"`
	// Witnesses is the policy's judgement of Checkpoint's cosignatures (CheckedByPolicy only).
	Witnesses *Witnesses `json:"witnesses,omitempty"`
	// Uncosigned is the size of a later checkpoint signed by the log that the policy's quorum has
	// not cosigned (0: none): its leaves stay in the unsigned tail.
	Uncosigned int64 `json:"uncosigned,omitempty"`
}

// What checked a story's signatures (LogState.CheckedBy).
const (
	CheckedByLogKey = "log-key"
	CheckedByPolicy = "policy"
)

// Witnesses is how a witness policy judged the signed checkpoint.
type Witnesses struct {
	Cosigned  []string `json:"cosigned"`  // the policy's names of the witnesses whose cosignatures verify
	Of        int      `json:"of"`        // witnesses the policy names
	Quorum    string   `json:"quorum"`    // the policy's quorum
	QuorumMet bool     `json:"quorumMet"` // always true of a trusted checkpoint; stated for the reader
}

// leafKinds is the log leaf kind of each history entry kind.
var leafKinds = map[string]deploylog.Kind{
	KindReceipt:    deploylog.KindReceipt,
	KindPreflight:  deploylog.KindPreflight,
	KindLiveAudit:  deploylog.KindLiveAudit,
	KindUnfinished: deploylog.KindIntent,
}

// logStory is the verified log of st, or nil for a store without one.
type logStory struct {
	state  LogState
	leaves []deploylog.Leaf
	// tombstones are the leaves by which store gc dropped a root, in leaf order.
	tombstones []tombstone
}

type tombstone struct {
	index int64
	leaf  deploylog.Leaf
}

// readLog verifies and reads the log of st (with o's verifier, when given). A store without a log
// has no log story (nil) unless a verifier asks for its signatures: then it is refused
// (LOG_NOT_INITIALIZED), as there is nothing signed to show.
func readLog(st *store.Store, o Options) (*logStory, error) { return readLogWith(st, o, nil) }

// readLogWith is readLog handing each publication the log's check read to publication
// (store.LogVerifyOptions.Publication), when set.
func readLogWith(st *store.Store, o Options, publication func(store.LogPublication)) (*logStory, error) {
	ls, err := st.ReadLogStoryWith(store.LogVerifyOptions{Verifier: o.LogVerifier, Publication: publication})
	if refuse.CodeOf(err) == store.CodeLogNotInitialized && o.LogVerifier == nil {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	size := int64(len(ls.Leaves))
	out := &logStory{
		state: LogState{Origin: ls.Origin, Size: size, Checkpoint: ls.Checkpoint, SignatureChecked: ls.SignatureChecked,
			Cosignatures: ls.Cosignatures, UnsignedTail: size - ls.Checkpoint},
		leaves: ls.Leaves,
	}
	if err := judgeWitnesses(&out.state, o.LogVerifier, ls); err != nil {
		return nil, err
	}
	for i, l := range ls.Leaves {
		if l.Kind == deploylog.KindTombstone {
			out.tombstones = append(out.tombstones, tombstone{int64(i), l})
		}
	}
	return out, nil
}

// judgeWitnesses states what checked the signed checkpoint and, under a policy, which witnesses
// cosigned it: the policy's own judgement of the note the store trusted, not a second count.
func judgeWitnesses(s *LogState, v deploylog.CheckpointVerifier, ls *store.LogStory) error {
	var pol *policy.Policy
	switch v := v.(type) {
	case nil:
		return nil
	case policy.Verifier:
		pol = v.Policy
	case *policy.Verifier:
		pol = v.Policy
	}
	if pol == nil {
		s.CheckedBy = CheckedByLogKey
		return nil
	}
	s.CheckedBy = CheckedByPolicy
	if ls.Latest > ls.Checkpoint {
		s.Uncosigned = ls.Latest
	}
	if ls.Checkpoint == 0 {
		return nil
	}
	// Check, not Evaluate: the store trusted this checkpoint under the policy, so its quorum is
	// met; a note that no longer meets it (changed between the reads) is refused, not reported.
	r, err := pol.Check(ls.Note)
	if err != nil {
		return err
	}
	s.Witnesses = &Witnesses{Cosigned: r.Witnesses(), Of: len(pol.Witnesses), Quorum: r.Quorum, QuorumMet: r.QuorumMet}
	return nil
}

// place is the index of the last leaf that publishes the record d as kind (describe's one record;
// history has each record's leaf from the log's check); a root record without a leaf is refused
// (the log verified, so this only happens if the store changed between the reads).
func (l *logStory) place(kind string, d digest.Digest) (int64, error) {
	lk := leafKinds[kind]
	for i := len(l.leaves) - 1; i >= 0; i-- {
		if lf := l.leaves[i]; lf.Kind == lk && lf.Record == d {
			return int64(i), nil
		}
	}
	return 0, refuse.New(store.CodeLogNotLogged, "the %s %s has no leaf in the deployment log", kind, d)
}

// writeLogLine prints the order source and, with a log, how far its checkpoints cover the story:
// signed up to which size, by whom, and the unsigned tail; without a verifier it says plainly that
// no signature was checked and how to check them.
func writeLogLine(w io.Writer, order string, s *LogState) {
	if s == nil {
		fmt.Fprintln(w, "order: the records (this store has no deployment log)")
		return
	}
	fmt.Fprintf(w, "order: the deployment log %s, %d leaves\n", refuse.Ident(s.Origin), s.Size)
	fmt.Fprintln(w, logLine(s))
}

// logLine is the second line of a story told from the log (docs/lifecycle.md pins each form).
func logLine(s *LogState) string {
	tail := fmt.Sprintf("%d leaves in the unsigned tail", s.UnsignedTail)
	if !s.SignatureChecked {
		if s.Checkpoint == 0 {
			return fmt.Sprintf("log: no checkpoint: all %d leaves are in the unsigned tail", s.Size)
		}
		return fmt.Sprintf("log: signatures not checked (give --log-key VKEY or --policy FILE): the largest stored checkpoint has size %d (%d witness cosignatures kept), %s",
			s.Checkpoint, s.Cosignatures, tail)
	}
	if s.Checkpoint == 0 {
		return fmt.Sprintf("log: no signed checkpoint: all %d leaves are in the unsigned tail", s.Size)
	}
	head := fmt.Sprintf("log: signed up to size %d (checkpoint of %s)", s.Checkpoint, refuse.Ident(s.Origin))
	if s.Witnesses == nil {
		return fmt.Sprintf("%s, witnesses not checked (%d cosignatures kept; give --policy FILE to check them), %s", head, s.Cosignatures, tail)
	}
	q := "quorum " + refuse.Ident(s.Witnesses.Quorum) + " met"
	if s.Witnesses.Quorum == policy.None {
		q = "quorum none: no cosignature required"
	}
	line := fmt.Sprintf("%s, cosigned by %d of %d witnesses (%s)", head, len(s.Witnesses.Cosigned), s.Witnesses.Of, q)
	if s.Uncosigned > 0 {
		line += fmt.Sprintf(", checkpoint %d not yet cosigned by the quorum", s.Uncosigned)
	}
	return line + ", " + tail
}
