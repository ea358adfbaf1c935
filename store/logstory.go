package store

import (
	"golang.org/x/sys/unix"

	"github.com/qinglong/ql3/deploylog"
)

// LogStory is what ql3 history and describe read of the log: the verified log's leaves in commit
// order and the checkpoint that covers the most of them.
type LogStory struct {
	Origin string
	Leaves []deploylog.Leaf // 0..Size-1, in commit order
	// Checkpoint is the largest stored checkpoint (0 with none): its tree was recomputed from
	// the leaves by VerifyLog. SignatureChecked says whether a verifier also accepted its
	// signatures; without one, a stored checkpoint is reported, not trusted.
	Checkpoint       int64
	SignatureChecked bool
	// Cosignatures is the number of witnesses whose cosignatures are kept beside Checkpoint.
	Cosignatures int
}

// ReadLogStory verifies the log (VerifyLog with v, which may be nil) and returns its leaves; a log
// with any error is refused with the first error's code, so a story is never told from a log
// that does not verify. LOG_NOT_INITIALIZED without a log. Nothing is written.
func (s *Store) ReadLogStory(v deploylog.CheckpointVerifier) (*LogStory, error) {
	r, leaves, err := s.verifyLog(LogVerifyOptions{Verifier: v})
	if err != nil {
		return nil, err
	}
	if err := r.Err(); err != nil {
		return nil, err
	}
	ls := &LogStory{Origin: r.Origin, SignatureChecked: v != nil}
	if v != nil {
		ls.Checkpoint = r.SignedSize
	} else {
		for _, c := range r.Checkpoints {
			ls.Checkpoint = max(ls.Checkpoint, c.Size)
		}
	}
	l, release, err := s.holdLog()
	if err != nil {
		return nil, err
	}
	defer release()
	// The leaves VerifyLog read and judged: a publication appended since is not in this story.
	ls.Leaves = leaves[:r.Size]
	if ls.Checkpoint > 0 {
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
