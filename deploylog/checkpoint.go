package deploylog

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/qinglong/ql3/refuse"
)

// MaxNoteSize bounds a signed checkpoint (with its cosignatures) before it is parsed.
const MaxNoteSize = 64 << 10

// Checkpoint is a C2SP tlog-checkpoint body: the log's origin, its tree size and root hash, and
// any extension lines (ql3 writes none, and keeps those it reads).
type Checkpoint struct {
	Origin     string
	Size       int64
	Hash       tlog.Hash
	Extensions []string
}

// Tree is the checkpoint's tree.
func (c Checkpoint) Tree() tlog.Tree { return tlog.Tree{N: c.Size, Hash: c.Hash} }

// Marshal returns the checkpoint's body: origin, decimal size and base64 root, one a line, then
// the extension lines.
func (c Checkpoint) Marshal() []byte {
	var b strings.Builder
	b.WriteString(c.Origin + "\n" + strconv.FormatInt(c.Size, 10) + "\n" + base64.StdEncoding.EncodeToString(c.Hash[:]) + "\n")
	for _, e := range c.Extensions {
		b.WriteString(e + "\n")
	}
	return []byte(b.String())
}

// ParseCheckpoint parses a checkpoint body strictly: an origin line that is valid UTF-8 without
// leading or trailing space, a decimal size without a sign or leading zero, a canonical base64
// root of 32 bytes, then non-empty extension lines.
func ParseCheckpoint(text string) (Checkpoint, error) {
	bad := func(f string, a ...any) (Checkpoint, error) {
		return Checkpoint{}, refuse.New(CodeCheckpointMalformed, "checkpoint "+f, a...)
	}
	if !strings.HasSuffix(text, "\n") {
		return bad("does not end with a newline")
	}
	lines := strings.Split(text[:len(text)-1], "\n")
	if len(lines) < 3 {
		return bad("has %d lines, want at least 3", len(lines))
	}
	var c Checkpoint
	c.Origin = lines[0]
	if c.Origin == "" || strings.TrimSpace(c.Origin) != c.Origin || !utf8.ValidString(c.Origin) {
		return bad("origin line is empty, padded or not UTF-8")
	}
	n, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != lines[1] {
		return bad("size line is not a canonical decimal")
	}
	c.Size = n
	h, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(h) != tlog.HashSize || base64.StdEncoding.EncodeToString(h) != lines[2] {
		return bad("root hash line is not the base64 of 32 bytes")
	}
	copy(c.Hash[:], h)
	for _, e := range lines[3:] {
		if e == "" {
			return bad("has an empty extension line")
		}
		c.Extensions = append(c.Extensions, e)
	}
	return c, nil
}

// GenerateKey returns a new Ed25519 note signer key and its verifier key, named name (ql3 names
// the log key after the log's origin).
func GenerateKey(name string) (signer, verifier string, err error) {
	signer, verifier, err = note.GenerateKey(rand.Reader, name)
	if err != nil {
		return "", "", refuse.Wrap(CodeKey, err, "generate note key")
	}
	return signer, verifier, nil
}

// NewSigner parses a note signer key. The key's text never appears in an error.
func NewSigner(skey string) (note.Signer, error) {
	s, err := note.NewSigner(strings.TrimSpace(skey))
	if err != nil {
		return nil, refuse.New(CodeKey, "the log signer key does not parse as a note signer key")
	}
	return s, nil
}

// NewVerifier parses a note verifier key.
func NewVerifier(vkey string) (note.Verifier, error) {
	v, err := note.NewVerifier(strings.TrimSpace(vkey))
	if err != nil {
		return nil, refuse.Wrap(CodeKey, err, "the log verifier key does not parse")
	}
	return v, nil
}

// Sign returns c as a signed note, signed by s. The key's name must be the checkpoint's origin.
func Sign(c Checkpoint, s note.Signer) ([]byte, error) {
	if s.Name() != c.Origin {
		return nil, refuse.New(CodeOrigin, "the log key is named %q, the log's origin is %q", s.Name(), c.Origin)
	}
	if _, err := ParseCheckpoint(string(c.Marshal())); err != nil {
		return nil, err
	}
	msg, err := note.Sign(&note.Note{Text: string(c.Marshal())}, s)
	if err != nil {
		return nil, refuse.Wrap(CodeCheckpointMalformed, err, "sign checkpoint")
	}
	return msg, nil
}

// OpenCheckpoint parses a signed checkpoint and checks the log's signature with v, whose name
// must be the checkpoint's origin, and that origin is origin ("" skips that check). Other
// signatures (witness cosignatures) are kept, unverified, in the returned note's
// UnverifiedSigs. A note with anything after its signature lines, or that is not exactly what
// the note format allows, is refused (LOG_CHECKPOINT_MALFORMED).
func OpenCheckpoint(msg []byte, origin string, v note.Verifier) (Checkpoint, *note.Note, error) {
	if v == nil {
		return Checkpoint{}, nil, refuse.New(CodeCheckpointSig, "no log verifier key to check the checkpoint with")
	}
	c, n, err := parseNote(msg, note.VerifierList(v))
	if err != nil {
		return Checkpoint{}, nil, err
	}
	if origin != "" && c.Origin != origin {
		return Checkpoint{}, nil, refuse.New(CodeOrigin, "checkpoint of origin %q, the log's origin is %q", c.Origin, origin)
	}
	if v.Name() != c.Origin {
		return Checkpoint{}, nil, refuse.New(CodeOrigin, "checkpoint of origin %q is signed by key %q", c.Origin, v.Name())
	}
	if len(n.Sigs) == 0 {
		return Checkpoint{}, nil, refuse.New(CodeCheckpointSig, "checkpoint of %s at size %d has no signature by the log key", c.Origin, c.Size)
	}
	return c, n, nil
}

// ParseSignedCheckpoint parses a signed checkpoint without checking any signature: for reading
// a store's checkpoints when no key is given. The note must still be well formed.
func ParseSignedCheckpoint(msg []byte) (Checkpoint, *note.Note, error) {
	return parseNote(msg, note.VerifierList())
}

func parseNote(msg []byte, known note.Verifiers) (Checkpoint, *note.Note, error) {
	if len(msg) > MaxNoteSize {
		return Checkpoint{}, nil, refuse.New(CodeCheckpointMalformed, "signed checkpoint of %d bytes exceeds %d", len(msg), MaxNoteSize)
	}
	n, err := note.Open(msg, known)
	var unverified *note.UnverifiedNoteError
	var invalid *note.InvalidSignatureError
	switch {
	case errors.As(err, &unverified):
		n = unverified.Note
	case errors.As(err, &invalid):
		return Checkpoint{}, nil, refuse.New(CodeCheckpointSig, "a signature on the checkpoint by %s does not verify", invalid.Name)
	case err != nil:
		return Checkpoint{}, nil, refuse.Wrap(CodeCheckpointMalformed, err, "signed checkpoint")
	}
	// note.Open splits at the last blank line; the body must still be one checkpoint.
	c, err := ParseCheckpoint(n.Text)
	if err != nil {
		return Checkpoint{}, nil, err
	}
	return c, n, nil
}
