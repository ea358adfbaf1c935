package policy

import (
	"encoding/base64"
	"errors"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"

	"github.com/qinglong/ql3/refuse"
)

// MaxNoteSize bounds a signed checkpoint with its cosignatures before it is parsed.
const MaxNoteSize = 64 << 10

// Cosignature is one valid cosignature by a policy witness.
type Cosignature struct {
	Witness   string // the witness's name in the policy
	KeyName   string // the cosigner's name on the signature line
	Timestamp int64  // POSIX seconds the witness signed at (its claim)
}

// Result is what a signed checkpoint shows under a policy.
type Result struct {
	Origin    string        // the checkpoint's origin line
	Size      int64         // its tree size
	Log       string        // the name of the policy log key that signed it (its origin)
	Cosigned  []Cosignature // valid cosignatures by policy witnesses, in note order, one per witness
	Ignored   int           // signature lines of keys the policy does not name (not counted)
	Quorum    string        // the policy's quorum name
	QuorumMet bool
}

// Witnesses are the names of the witnesses that cosigned.
func (r *Result) Witnesses() []string {
	names := make([]string, len(r.Cosigned))
	for i, c := range r.Cosigned {
		names[i] = c.Witness
	}
	return names
}

// Evaluate judges a signed checkpoint (a note: the checkpoint text, a blank line, signature
// lines) under p: it must carry a valid signature of a policy log whose key name is the
// checkpoint's origin (POLICY_LOG_SIGNATURE); every line that carries a policy witness's name
// and key ID must verify as a cosignature/v1 of the note text (POLICY_COSIGNATURE_INVALID);
// lines of other keys are ignored and counted, as c2sp.org/tlog-witness asks of clients. It then
// evaluates the quorum; an unmet quorum is not an error here (Check makes it one).
func (p *Policy) Evaluate(msg []byte) (*Result, error) {
	if len(msg) > MaxNoteSize {
		return nil, refuse.New(CodeNoteMalformed, "signed checkpoint of %d bytes exceeds %d", len(msg), MaxNoteSize)
	}
	logs := make([]note.Verifier, len(p.Logs))
	for i, l := range p.Logs {
		logs[i] = l.Verifier
	}
	n, err := note.Open(msg, note.VerifierList(logs...))
	var unverified *note.UnverifiedNoteError
	var invalid *note.InvalidSignatureError
	switch {
	case errors.As(err, &unverified):
		return nil, refuse.New(CodeLogSignature, "the checkpoint carries no signature of a log the policy names")
	case errors.As(err, &invalid):
		return nil, refuse.New(CodeLogSignature, "the signature of policy log %s on the checkpoint does not verify", refuse.Ident(invalid.Name))
	case err != nil:
		return nil, refuse.Wrap(CodeNoteMalformed, err, "signed checkpoint")
	}
	origin, size, err := checkpointHead(n.Text)
	if err != nil {
		return nil, err
	}
	r := &Result{Origin: origin, Size: size, Quorum: p.Quorum}
	for _, s := range n.Sigs {
		if s.Name == origin {
			r.Log = s.Name
		}
	}
	if r.Log == "" {
		return nil, refuse.New(CodeLogSignature, "checkpoint of origin %s is signed only by policy logs of other names", refuse.Ident(origin))
	}
	seen := map[string]bool{}
	for _, s := range n.UnverifiedSigs {
		w, ok := p.witnessFor(s.Name, s.Hash)
		if !ok {
			r.Ignored++
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(s.Base64)
		if err != nil || !w.Verifier.Verify([]byte(n.Text), raw[4:]) {
			return nil, refuse.New(CodeCosignatureInvalid, "the cosignature of witness %s on checkpoint %s at size %d does not verify",
				refuse.Ident(w.Name), refuse.Ident(origin), size)
		}
		if seen[w.Name] {
			continue
		}
		seen[w.Name] = true
		t, _ := CosignatureTimestamp(s)
		r.Cosigned = append(r.Cosigned, Cosignature{Witness: w.Name, KeyName: s.Name, Timestamp: t})
	}
	r.QuorumMet = p.met(seen)
	return r, nil
}

// Check is Evaluate that refuses an unmet quorum (POLICY_QUORUM), naming who did cosign.
func (p *Policy) Check(msg []byte) (*Result, error) {
	r, err := p.Evaluate(msg)
	if err != nil {
		return nil, err
	}
	if !r.QuorumMet {
		who := "no policy witness"
		if len(r.Cosigned) > 0 {
			names := r.Witnesses()
			for i := range names {
				names[i] = refuse.Ident(names[i])
			}
			who = strings.Join(names, ", ")
		}
		return r, refuse.New(CodeQuorum, "checkpoint %s at size %d does not meet quorum %s: cosigned by %s (%d lines of unknown keys ignored)",
			refuse.Ident(r.Origin), r.Size, refuse.Ident(p.Quorum), who, r.Ignored)
	}
	return r, nil
}

// met evaluates the quorum over the witnesses that cosigned; groups only name earlier lines,
// so one pass in order settles every group.
func (p *Policy) met(cosigned map[string]bool) bool {
	if p.Quorum == None {
		return true
	}
	witnessed := map[string]bool{}
	for name := range cosigned {
		witnessed[name] = true
	}
	for _, g := range p.Groups {
		k := 0
		for _, m := range g.Members {
			if witnessed[m] {
				k++
			}
		}
		witnessed[g.Name] = k >= g.Threshold
	}
	return witnessed[p.Quorum]
}

// checkpointHead reads a checkpoint's origin and size lines (the full checkpoint grammar is
// deploylog's; a cosignature/v1 covers whatever the note text is).
func checkpointHead(text string) (string, int64, error) {
	lines := strings.SplitN(text, "\n", 4)
	if len(lines) < 4 || lines[0] == "" {
		return "", 0, refuse.New(CodeNoteMalformed, "the note text is not a checkpoint (origin, size and root lines)")
	}
	n, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != lines[1] {
		return "", 0, refuse.New(CodeNoteMalformed, "the checkpoint's size line is not a canonical decimal")
	}
	return lines[0], n, nil
}
