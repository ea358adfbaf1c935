package witness

import (
	"bytes"
	"context"
	"errors"
	"strconv"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/qinglong/ql3/refuse"
)

// ProofFunc returns the consistency proof from a tree of size old to the checkpoint's tree (an
// empty proof when old is 0 or the checkpoint's size).
type ProofFunc func(old int64) (tlog.TreeProof, error)

// Result is a successful submission.
type Result struct {
	OldSize      int64  // the old size the witness accepted
	Size         int64  // the checkpoint's size
	Cosignatures []byte // the verified cosignature lines of the witness key
}

// Submit obtains the witness's cosignature of a signed checkpoint. It first claims hint as the
// witness's last size (what the caller last saw it cosign; 0 when unknown); on a 409 it learns
// the witness's size M and, when M is not beyond the checkpoint, retries once from M with
// proof(M). A witness ahead of the checkpoint is a rollback (WITNESS_AHEAD); a witness that
// holds the checkpoint's own size under another root is a fork (WITNESS_INCONSISTENT).
func (c *Client) Submit(ctx context.Context, signed []byte, hint int64, proof ProofFunc) (*Result, error) {
	size, err := checkpointSize(signed)
	if err != nil {
		return nil, err
	}
	old := hint
	if old < 0 || old > size {
		old = 0
	}
	for attempt := 0; ; attempt++ {
		p, err := proofFrom(proof, old, size)
		if err != nil {
			return nil, err
		}
		lines, err := c.AddCheckpoint(ctx, old, p, signed)
		if err == nil {
			return &Result{OldSize: old, Size: size, Cosignatures: lines}, nil
		}
		var conflict *ConflictError
		if !errors.As(err, &conflict) {
			return nil, err
		}
		switch m := conflict.Size; {
		case m > size:
			return nil, refuse.New(CodeAhead, "witness %s has cosigned a tree of size %d, the checkpoint has size %d: the log was rolled back or this is an older copy", c.shown, m, size)
		case m == old:
			// The witness names the size we sent: the spec's answer to the same size under
			// another root.
			return nil, refuse.New(CodeInconsistent, "witness %s holds another tree of size %d than the checkpoint", c.shown, m)
		case attempt > 0:
			return nil, refuse.Wrap(CodeConflict, err, "witness %s moved again during the retry", c.shown)
		default:
			old = m
		}
	}
}

func proofFrom(proof ProofFunc, old, size int64) (tlog.TreeProof, error) {
	if old == 0 || old == size {
		return nil, nil
	}
	if proof == nil {
		return nil, refuse.New(CodeCheckpoint, "no consistency proof source for size %d to %d", old, size)
	}
	p, err := proof(old)
	if err != nil {
		return nil, refuse.Wrap(CodeCheckpoint, err, "consistency proof from size %d to %d", old, size)
	}
	return p, nil
}

// checkpointSize reads the size line of a signed checkpoint note; the log package has already
// judged the note, this only guards the retry arithmetic.
func checkpointSize(signed []byte) (int64, error) {
	text, _, ok := bytes.Cut(signed, []byte("\n\n"))
	lines := bytes.SplitN(text, []byte("\n"), 3)
	if !ok || len(lines) < 3 {
		return 0, refuse.New(CodeCheckpoint, "the checkpoint to submit is not a signed checkpoint note")
	}
	n, err := strconv.ParseInt(string(lines[1]), 10, 64)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != string(lines[1]) {
		return 0, refuse.New(CodeCheckpoint, "the checkpoint's size line is not a canonical decimal")
	}
	return n, nil
}
