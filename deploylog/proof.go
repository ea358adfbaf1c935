package deploylog

import (
	"bytes"
	"encoding/base64"
	"strconv"
	"strings"

	"github.com/opencontainers/go-digest"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/qinglong/ql3/refuse"
)

// ProofHeader is the first line of a C2SP tlog-proof.
const ProofHeader = "c2sp.org/tlog-proof@v1"

// MaxProofSize bounds a tlog-proof file before it is parsed.
const MaxProofSize = MaxNoteSize + 8<<10

// Proof is a C2SP tlog-proof (c2sp.org/tlog-proof@v1): a leaf's index, its inclusion proof and
// the signed (and possibly cosigned) checkpoint it leads to. ql3 puts the leaf's own bytes in
// the proof's extra data, so a proof names the record it proves without the log at hand.
type Proof struct {
	Extra      []byte // ql3: the canonical leaf bytes
	Index      int64
	Hashes     tlog.RecordProof
	Checkpoint []byte // the signed note, verbatim
}

// Marshal returns the proof file's bytes.
func (p Proof) Marshal() []byte {
	var b bytes.Buffer
	b.WriteString(ProofHeader + "\n")
	if p.Extra != nil {
		b.WriteString("extra " + base64.StdEncoding.EncodeToString(p.Extra) + "\n")
	}
	b.WriteString("index " + strconv.FormatInt(p.Index, 10) + "\n")
	for _, h := range p.Hashes {
		b.WriteString(base64.StdEncoding.EncodeToString(h[:]) + "\n")
	}
	b.WriteString("\n")
	b.Write(p.Checkpoint)
	return b.Bytes()
}

// ParseProof parses a tlog-proof file strictly (LOG_PROOF_MALFORMED): the header, an optional
// extra line, the index, at most 63 canonical base64 hashes, an empty line, then a well-formed
// signed checkpoint (its signatures are checked by Verify, not here).
func ParseProof(b []byte) (Proof, error) {
	bad := func(f string, a ...any) (Proof, error) {
		return Proof{}, refuse.New(CodeProofMalformed, "tlog-proof "+f, a...)
	}
	if len(b) > MaxProofSize {
		return bad("of %d bytes exceeds %d", len(b), MaxProofSize)
	}
	head, rest, ok := bytes.Cut(b, []byte("\n\n"))
	if !ok {
		return bad("has no empty line before its checkpoint")
	}
	lines := strings.Split(string(head), "\n")
	if lines[0] != ProofHeader {
		return bad("does not start with %s", ProofHeader)
	}
	lines = lines[1:]
	var p Proof
	if len(lines) > 0 && strings.HasPrefix(lines[0], "extra ") {
		e := strings.TrimPrefix(lines[0], "extra ")
		x, err := base64.StdEncoding.DecodeString(e)
		if err != nil || base64.StdEncoding.EncodeToString(x) != e {
			return bad("extra line is not canonical base64")
		}
		p.Extra, lines = x, lines[1:]
	}
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "index ") {
		return bad("has no index line")
	}
	is := strings.TrimPrefix(lines[0], "index ")
	i, err := strconv.ParseInt(is, 10, 64)
	if err != nil || i < 0 || strconv.FormatInt(i, 10) != is {
		return bad("index is not a canonical decimal")
	}
	p.Index, lines = i, lines[1:]
	if len(lines) > 63 {
		return bad("has %d hashes, more than any tree holds", len(lines))
	}
	for _, l := range lines {
		h, err := base64.StdEncoding.DecodeString(l)
		if err != nil || len(h) != tlog.HashSize || base64.StdEncoding.EncodeToString(h) != l {
			return bad("hash line is not the base64 of 32 bytes")
		}
		p.Hashes = append(p.Hashes, tlog.Hash(h))
	}
	p.Checkpoint = rest
	if _, _, err := ParseSignedCheckpoint(rest); err != nil {
		return Proof{}, refuse.Wrap(CodeProofMalformed, err, "tlog-proof checkpoint")
	}
	return p, nil
}

// CheckpointVerifier opens a signed checkpoint and decides whether it is trusted: the log's
// signature (KeyVerifier) or a witness policy too (package policy). The witness's policy
// verifier implements it, so that `log verify --policy` and `audit --policy` use one path.
type CheckpointVerifier interface {
	// VerifyCheckpoint returns the checkpoint when msg is trusted, a refusal otherwise.
	VerifyCheckpoint(msg []byte) (Checkpoint, error)
}

// KeyVerifier trusts a checkpoint signed by the log key V for origin Origin ("" takes the
// key's name, which must be the origin anyway).
type KeyVerifier struct {
	V      note.Verifier
	Origin string
}

// VerifyCheckpoint implements CheckpointVerifier.
func (k KeyVerifier) VerifyCheckpoint(msg []byte) (Checkpoint, error) {
	c, _, err := OpenCheckpoint(msg, k.Origin, k.V)
	return c, err
}

var _ CheckpointVerifier = KeyVerifier{}

// Verify checks the proof: its checkpoint is trusted by cv, its extra data is a leaf naming
// record (LOG_PROOF_RECORD otherwise), and the inclusion proof leads from that leaf at Index to
// the checkpoint's root (LOG_INCLUSION). It returns the leaf and the checkpoint.
func (p Proof) Verify(cv CheckpointVerifier, record digest.Digest) (Leaf, Checkpoint, error) {
	c, err := cv.VerifyCheckpoint(p.Checkpoint)
	if err != nil {
		return Leaf{}, Checkpoint{}, err
	}
	l, err := ParseLeaf(p.Extra)
	if err != nil {
		return Leaf{}, Checkpoint{}, refuse.Wrap(CodeProofRecord, err, "tlog-proof extra data is not a ql3 leaf")
	}
	if l.Record != record && !(l.Kind == KindAttestation && l.Bundle == record) {
		return Leaf{}, Checkpoint{}, refuse.New(CodeProofRecord, "tlog-proof is for record %s, not %s", l.Record, record)
	}
	if err := CheckInclusion(p.Hashes, c.Size, c.Hash, p.Index, tlog.RecordHash(p.Extra)); err != nil {
		return Leaf{}, Checkpoint{}, err
	}
	return l, c, nil
}
