package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/sys/unix"

	"github.com/qinglong/ql3/deploylog"
	"github.com/qinglong/ql3/deploylog/policy"
	"github.com/qinglong/ql3/refuse"
)

// Witness cosignatures live beside the checkpoints they cosign (docs/log.md, "Witnesses and
// policy"): log/cosignatures/<size, 20 digits>-<witness id> holds the cosignature lines one
// witness returned for the stored checkpoint of that size, written once, no-replace, 0400 like
// every log file. The witness id is the first 16 hex digits of SHA-256 of the witness's verifier
// key text. A checkpoint is read back with every kept cosignature appended (sorted by file name),
// which is the note a policy judges and a tlog-proof carries.
const (
	cosignaturesName = "cosignatures"
	cosignaturesRel  = "log/cosignatures"
	maxCosignFile    = 4 << 10
	witnessIDLen     = 16
)

// witnessID names a witness's cosignature files.
func witnessID(v *policy.CosignatureVerifier) string {
	h := sha256.Sum256([]byte(v.String()))
	return hex.EncodeToString(h[:])[:witnessIDLen]
}

func cosignatureName(n int64, id string) string { return pad20(n) + "-" + id }

// parseCosignatureName splits <size>-<witness id>.
func parseCosignatureName(name string) (int64, string, bool) {
	sz, id, ok := strings.Cut(name, "-")
	if !ok || len(id) != witnessIDLen || strings.Trim(id, "0123456789abcdef") != "" {
		return 0, "", false
	}
	n, ok := parseName(sz)
	return n, id, ok
}

// openCosignatures opens log/cosignatures; ok is false when no cosignature was ever kept.
func openCosignatures(l *logDirs) (heldDir, bool, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(l.log.fd, cosignaturesName, &st, unix.AT_SYMLINK_NOFOLLOW); errors.Is(err, unix.ENOENT) {
		return heldDir{fd: -1}, false, nil
	}
	d, err := openDir(l.log.fd, cosignaturesName, cosignaturesRel)
	if err != nil {
		return heldDir{fd: -1}, false, err
	}
	return d, true, nil
}

// PutCosignatures keeps witness v's cosignature lines of the stored checkpoint of size n. The
// lines must be note signature lines that, appended to that checkpoint, hold a valid
// cosignature of v (POLICY_COSIGNATURE_INVALID otherwise); only v's lines are kept. The file is
// never replaced: when v's cosignature of size n is already kept, stored is false and the first
// one stays (a witness asked again signs anew with a later timestamp).
func (s *Store) PutCosignatures(n int64, v *policy.CosignatureVerifier, lines []byte) (stored bool, err error) {
	l, release, err := s.holdLog()
	if err != nil {
		return false, err
	}
	defer release()
	cp, err := readLogFile(l.checkpoints.fd, checkpointName(n), checkpointsRel+"/"+checkpointName(n), deploylog.MaxNoteSize)
	if err != nil {
		return false, err
	}
	opened, err := note.Open(append(append([]byte(nil), cp...), lines...), note.VerifierList(v))
	if err != nil {
		return false, refuse.New(policy.CodeCosignatureInvalid, "no valid cosignature of witness %s over the stored checkpoint of size %d", refuse.Ident(v.Name()), n)
	}
	var keep bytes.Buffer
	for _, sig := range opened.Sigs {
		keep.WriteString("— " + sig.Name + " " + sig.Base64 + "\n")
	}
	if keep.Len() > maxCosignFile {
		return false, refuse.New(CodeLogFile, "witness %s returned %d bytes of cosignatures, more than %d", refuse.Ident(v.Name()), keep.Len(), maxCosignFile)
	}

	if err := unix.Mkdirat(l.log.fd, cosignaturesName, 0o700); err == nil {
		if err := unix.Fsync(l.log.fd); err != nil {
			return false, refuse.Wrap(CodeStoreIO, err, "fsync %s", logDirName)
		}
	} else if !errors.Is(err, unix.EEXIST) {
		return false, refuse.Wrap(CodeStoreIO, err, "create %s", cosignaturesRel)
	}
	d, _, err := openCosignatures(l)
	if err != nil {
		return false, err
	}
	defer unix.Close(d.fd)
	name := cosignatureName(n, witnessID(v))
	err = s.commitAt(d.fd, cosignaturesRel, name, keep.Bytes())
	if errors.Is(err, errExists) {
		return false, nil
	}
	return err == nil, err
}

// WitnessedSize is the largest checkpoint size that witness v's cosignature is kept for (0 when
// none): the old size the witness client claims first.
func (s *Store) WitnessedSize(v *policy.CosignatureVerifier) (int64, error) {
	l, release, err := s.holdLog()
	if err != nil {
		return 0, err
	}
	defer release()
	d, ok, err := openCosignatures(l)
	if err != nil || !ok {
		return 0, err
	}
	defer unix.Close(d.fd)
	names, err := listDir(d.fd, cosignaturesRel)
	if err != nil {
		return 0, err
	}
	id := witnessID(v)
	var size int64
	for _, name := range names {
		if n, w, ok := parseCosignatureName(name); ok && w == id {
			size = max(size, n)
		}
	}
	return size, nil
}

// withCosignatures appends the kept cosignatures of size n to the checkpoint note cp.
func withCosignatures(l *logDirs, n int64, cp []byte) ([]byte, error) {
	d, ok, err := openCosignatures(l)
	if err != nil || !ok {
		return cp, err
	}
	defer unix.Close(d.fd)
	names, err := listDir(d.fd, cosignaturesRel)
	if err != nil {
		return nil, err
	}
	out := append([]byte(nil), cp...)
	for _, name := range names {
		if m, _, ok := parseCosignatureName(name); !ok || m != n {
			continue
		}
		b, err := readLogFile(d.fd, name, cosignaturesRel+"/"+name, maxCosignFile)
		if err != nil {
			return nil, err
		}
		out = append(out, b...)
	}
	return out, nil
}

// verifyCosignatureFiles reports files under log/cosignatures that are not a witness's
// cosignatures of a stored checkpoint size (their lines are judged with the checkpoint).
func verifyCosignatureFiles(l *logDirs, r *LogReport) {
	d, ok, err := openCosignatures(l)
	if err != nil {
		r.AddErr(-1, cosignaturesRel, err)
		return
	}
	if !ok {
		return
	}
	defer unix.Close(d.fd)
	names, err := listDir(d.fd, cosignaturesRel)
	if err != nil {
		r.AddErr(-1, cosignaturesRel, err)
		return
	}
	checkpoints, err := listDir(l.checkpoints.fd, checkpointsRel)
	if err != nil {
		r.AddErr(-1, checkpointsRel, err)
		return
	}
	sizes := map[int64]bool{}
	for _, name := range checkpoints {
		if n, ok := parseName(name); ok {
			sizes[n] = true
		}
	}
	for _, name := range names {
		rel := cosignaturesRel + "/" + name
		n, _, ok := parseCosignatureName(name)
		switch {
		case !ok:
			r.AddError(CodeLogFile, -1, rel, "stray file in %s", cosignaturesRel)
		case !sizes[n]:
			r.AddError(CodeLogFile, -1, rel, "cosignatures of size %d, for which no checkpoint is stored", n)
		}
	}
}

// requireQuorum makes a policy that no stored checkpoint meets an error: checkpoints signed by
// the log but not cosigned are hints one by one (a tail not witnessed yet), but a log whose
// witnesses never cosigned anything the policy accepts is not the witnessed history asked for.
func requireQuorum(r *LogReport) {
	misses := 0
	for _, h := range r.Hints {
		if h.Code == policy.CodeQuorum {
			misses++
		}
	}
	for _, c := range r.Checkpoints {
		if c.Trusted {
			return
		}
	}
	if misses > 0 {
		r.AddError(policy.CodeQuorum, -1, checkpointsRel, "none of the %d stored checkpoints is cosigned by the policy's quorum", misses)
	}
}
