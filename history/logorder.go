package history

import (
	"fmt"
	"io"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/deploylog"
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

// LogState says how much of the story the log's checkpoints cover.
type LogState struct {
	Origin string `json:"origin"`
	Size   int64  `json:"size"` // leaves in the log
	// Checkpoint is the tree size of the largest stored checkpoint (0: none); its tree was
	// recomputed from the leaves. Its signatures are checked by `ql3 log verify --key`, not here
	// (history takes no key): SignatureChecked is false.
	Checkpoint       int64 `json:"checkpoint"`
	SignatureChecked bool  `json:"signatureChecked"`
	Cosignatures     int   `json:"cosignatures"` // witnesses whose cosignatures are kept beside it
	UnsignedTail     int64 `json:"unsignedTail"` // leaves after Checkpoint
}

// leafKinds is the log leaf kind of each history entry kind.
var leafKinds = map[string]deploylog.Kind{
	KindReceipt:    deploylog.KindReceipt,
	KindPreflight:  deploylog.KindPreflight,
	KindLiveAudit:  deploylog.KindLiveAudit,
	KindUnfinished: deploylog.KindIntent,
}

type leafRef struct {
	kind   deploylog.Kind
	record digest.Digest
}

// logStory is the verified log of st, or nil for a store without one.
type logStory struct {
	state LogState
	index map[leafRef]int64
	// tombstones are the leaves by which store gc dropped a root, in leaf order.
	tombstones []tombstone
}

type tombstone struct {
	index int64
	leaf  deploylog.Leaf
}

func readLog(st *store.Store) (*logStory, error) {
	ls, err := st.ReadLogStory(nil)
	if refuse.CodeOf(err) == store.CodeLogNotInitialized {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	size := int64(len(ls.Leaves))
	out := &logStory{
		state: LogState{Origin: ls.Origin, Size: size, Checkpoint: ls.Checkpoint, SignatureChecked: ls.SignatureChecked,
			Cosignatures: ls.Cosignatures, UnsignedTail: size - ls.Checkpoint},
		index: make(map[leafRef]int64, len(ls.Leaves)),
	}
	for i, l := range ls.Leaves {
		if l.Kind != deploylog.KindTombstone {
			out.index[leafRef{l.Kind, l.Record}] = int64(i)
		} else {
			out.tombstones = append(out.tombstones, tombstone{int64(i), l})
		}
	}
	return out, nil
}

// place is the leaf index that publishes e's record; a root record without a leaf is refused
// (the log verified, so this only happens if the store changed between the reads).
func (l *logStory) place(kind string, d digest.Digest) (int64, error) {
	i, ok := l.index[leafRef{leafKinds[kind], d}]
	if !ok {
		return 0, refuse.New(store.CodeLogNotLogged, "the %s %s has no leaf in the deployment log", kind, d)
	}
	return i, nil
}

// writeLogLine prints the order source, and with a log how far its checkpoints cover the story.
func writeLogLine(w io.Writer, order string, s *LogState) {
	if s == nil {
		fmt.Fprintln(w, "order: the records (this store has no deployment log)")
		return
	}
	fmt.Fprintf(w, "order: the deployment log %s, %d leaves\n", refuse.Ident(s.Origin), s.Size)
	if s.Checkpoint == 0 {
		fmt.Fprintf(w, "signed: no checkpoint: all %d leaves are in the unsigned tail\n", s.Size)
		return
	}
	fmt.Fprintf(w, "signed: up to checkpoint %d (%d witness cosignatures; signatures are checked by ql3 log verify, not here), %d leaves in the unsigned tail\n",
		s.Checkpoint, s.Cosignatures, s.UnsignedTail)
}
