package store

import (
	"golang.org/x/sys/unix"

	"github.com/qinglong/ql3/deploylog"
	"github.com/qinglong/ql3/refuse"
)

// LogStory is what ql3 history and describe read of the log: the verified log's leaves in commit
// order and the checkpoint that covers the most of them.
type LogStory struct {
	Origin string
	Leaves []deploylog.Leaf // 0..Size-1, in commit order
	// Checkpoint is the largest stored checkpoint (0 with none): its tree was recomputed from
	// the leaves by VerifyLog. SignatureChecked says whether a verifier also accepted its
	// signatures; with one, Checkpoint is the largest checkpoint it trusts (the signed size);
	// without, a stored checkpoint is reported, not trusted.
	Checkpoint       int64
	SignatureChecked bool
	// Latest is the largest stored checkpoint, trusted or not: above Checkpoint only under a
	// witness policy, for a checkpoint signed by the log that the quorum has not cosigned yet.
	Latest int64
	// Cosignatures is the number of witnesses whose cosignatures are kept beside Checkpoint.
	Cosignatures int
	// Note is the signed checkpoint of size Checkpoint with the cosignature lines kept beside
	// it, as the verifier judged it (nil without a checkpoint): a policy's reader counts its
	// witnesses from it.
	Note []byte
}

// ReadLogStory verifies the log (VerifyLog with v, which may be nil) and returns its leaves; a log
// with any error is refused with the first error's code, so a story is never told from a log
// that does not verify. LOG_NOT_INITIALIZED without a log. Nothing is written.
func (s *Store) ReadLogStory(v deploylog.CheckpointVerifier) (*LogStory, error) {
	return s.ReadLogStoryWith(LogVerifyOptions{Verifier: v})
}

// ReadLogStoryWith is ReadLogStory verifying with o: o.Verifier judges the checkpoints, and
// o.Publication, when set, is handed each publication's entry and record as the verification
// reads them (a reader of the story then reads no record twice; it trusts what it was handed
// only once this returns without error); o.Since, when set, is checked as log verify does.
func (s *Store) ReadLogStoryWith(o LogVerifyOptions) (*LogStory, error) {
	v := o.Verifier
	r, leaves, err := s.verifyLog(o)
	if err != nil {
		return nil, err
	}
	if err := r.Err(); err != nil {
		// A story's reader prints no findings: the hint names the command that lists them.
		if e, ok := refuse.As(err); ok {
			e.WithHint("the story is told only from a log that verifies: ql3 log verify --store %s (with --key or --policy) lists every finding; nothing was written", s.root)
		}
		return nil, err
	}
	ls := &LogStory{Origin: r.Origin, SignatureChecked: v != nil}
	for _, c := range r.Checkpoints {
		ls.Latest = max(ls.Latest, c.Size)
	}
	ls.Checkpoint = ls.Latest
	if v != nil {
		ls.Checkpoint = r.SignedSize
	}
	l, release, err := s.holdLog()
	if err != nil {
		return nil, err
	}
	defer release()
	// The leaves VerifyLog read and judged: a publication appended since is not in this story.
	ls.Leaves = leaves[:r.Size]
	if ls.Checkpoint > 0 {
		// Checkpoints are kept no-replace: this is the note VerifyLog judged, with the
		// cosignatures kept beside it (a witness may have added one since: more, never fewer).
		name := checkpointName(ls.Checkpoint)
		b, err := readLogFile(l.checkpoints.fd, name, checkpointsRel+"/"+name, deploylog.MaxNoteSize)
		if err != nil {
			return nil, err
		}
		if ls.Note, err = withCosignatures(l, ls.Checkpoint, b); err != nil {
			return nil, err
		}
		d, ok, err := openCosignatures(l)
		if err != nil {
			return nil, err
		}
		if ok {
			defer unix.Close(d.fd)
			names, err := listDir(d.fd, cosignaturesRel)
			if err != nil {
				return nil, err
			}
			for _, name := range names {
				if n, _, ok := parseCosignatureName(name); ok && n == ls.Checkpoint {
					ls.Cosignatures++
				}
			}
		}
	}
	return ls, nil
}
