package store

import (
	"errors"
	"sort"

	"github.com/opencontainers/go-digest"
	"golang.org/x/sys/unix"

	"github.com/qinglong/ql3/deploylog"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
)

// The attestation index is the one two-level index kind:
// index/attestations/<hex of subject>/<hex of bundle> holds the canonical descriptor of the
// statement record that bundle signs (docs/attestations.md). Its directories are made on first
// use, 0700 like every store directory, so a store made before attestations existed stays valid.
// They are opened relative to the held index directory, never by a path.

// AttestationEntry is one attestation of a subject.
type AttestationEntry struct {
	Subject   digest.Digest       `json:"subject"`
	Bundle    digest.Digest       `json:"bundle"`
	Statement evidence.Descriptor `json:"statement"`
}

const attestationsRel = "index/" + evidence.IndexAttestations

// attestationDir opens index/attestations/<subject hex> relative to the held index directory,
// checked like every store directory; with create it makes the missing levels (mkdirat 0700).
// ok is false when it does not exist and create is false. synced, when create made a level,
// fsyncs the directory each new level was made in, so that the new name is durable; it always
// releases what it holds and must be called once (a no-op when nothing was made).
func (s *Store) attestationDir(subject digest.Digest, create bool) (held heldDir, ok bool, synced func() error, err error) {
	var made []int // directories a level was made in; index/ is held by the store, the others are ours
	synced = func() error {
		var err error
		for _, fd := range made {
			if serr := unix.Fsync(fd); serr != nil && err == nil {
				err = refuse.Wrap(CodeStoreIO, serr, "fsync %s", attestationsRel)
			}
			if fd != s.dirs[dIndex].fd {
				unix.Close(fd)
			}
		}
		made = nil
		return err
	}
	parent := s.dirs[dIndex].fd
	for i, name := range []string{evidence.IndexAttestations, subject.Encoded()} {
		rel := attestationsRel
		if i == 1 {
			rel += "/" + name
		}
		// release drops the attestations directory (level 0) once level 1 is open, unless a level
		// was made in it and it waits for its fsync.
		release := func() {
			if i == 1 && (len(made) == 0 || made[len(made)-1] != parent) {
				unix.Close(parent)
			}
		}
		if create {
			err := unix.Mkdirat(parent, name, 0o700)
			if err != nil && !errors.Is(err, unix.EEXIST) {
				release()
				synced()
				return heldDir{fd: -1}, false, func() error { return nil }, refuse.Wrap(CodeStoreIO, err, "create %s", rel)
			}
			if err == nil {
				made = append(made, parent)
			}
		} else {
			var st unix.Stat_t
			if err := unix.Fstatat(parent, name, &st, unix.AT_SYMLINK_NOFOLLOW); errors.Is(err, unix.ENOENT) {
				release()
				return heldDir{fd: -1}, false, synced, nil
			}
		}
		d, err := openDir(parent, name, rel)
		release()
		if err != nil {
			synced()
			return heldDir{fd: -1}, false, func() error { return nil }, err
		}
		held, parent = d, d.fd
	}
	return held, true, synced, nil
}

// PutAttestation records that bundle, which signs the statement record, attests subject. Both
// objects must already be stored. Recording the same entry again is a no-op; another statement
// under the same subject and bundle is refused with CodeIndexConflict. Like every index entry it
// is published only while the store path still names the store opened.
func (s *Store) PutAttestation(subject, bundle digest.Digest, statement evidence.Descriptor) error {
	if err := s.acquire(); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	b, err := attestationEntry(subject, bundle, statement)
	if err != nil {
		return err
	}
	dir, _, synced, err := s.attestationDir(subject, true)
	if err != nil {
		return err
	}
	defer unix.Close(dir.fd)
	// A level made for this entry is synced beside the entry's own commit, not before it: until
	// both are durable the call has not returned, and a crash leaves the entry either reachable or
	// gone with its directory, never half there.
	parents := make(chan error, 1)
	go func() { parents <- synced() }()
	if err := s.checkRoot(); err != nil {
		<-parents
		return err
	}
	st, err := s.stage(b, true)
	if err != nil {
		<-parents
		return err
	}
	defer st.discard(s)
	err = s.placeAttestation(dir.fd, subject, bundle, statement, st)
	if perr := <-parents; err == nil {
		err = perr
	}
	return err
}

// PutAttested stores a whole attestation of subject: the statement record, the bundle that signs
// it, and the index entry that names both, as two puts and PutAttestation would in turn, with
// fewer serial durable steps. Three rounds: the two objects' content, the entry's content and the
// index directories made for it are synced concurrently; the objects are renamed into place and
// blobs/sha256 synced; the entry is renamed into place and its directory synced. The order of
// durability is theirs: no name is durable before what it names, so a crash at any point leaves
// the whole attestation, or unreferenced objects, staging files and empty index directories.
func (s *Store) PutAttested(subject digest.Digest, statement, bundle []byte) (sd, bd evidence.Descriptor, err error) {
	if err := s.acquire(); err != nil {
		return sd, bd, err
	}
	defer s.mu.RUnlock()
	if _, err := evidence.ParseDigest(string(subject)); err != nil {
		return sd, bd, err
	}
	// Checked before anything is written: the statement is stored as the canonical record it must
	// already be, so that the store keeps exactly the bytes that were signed.
	for _, o := range [][]byte{statement, bundle} {
		if err := checkSize(o); err != nil {
			return sd, bd, err
		}
	}
	if err := checkRecord(evidence.MediaTypeStatement, statement); err != nil {
		return sd, bd, err
	}
	// The index directories are made while the objects are staged: both are metadata writes that
	// wait on the disk, in different directories, so they overlap. An empty index directory is
	// harmless whatever happens next, as after a crash.
	type madeDir struct {
		dir    heldDir
		synced func() error
		err    error
	}
	dirc := make(chan madeDir, 1)
	go func() {
		var m madeDir
		m.dir, _, m.synced, m.err = s.attestationDir(subject, true)
		dirc <- m
	}()
	b := s.NewBatch()
	sd, err = b.put(evidence.MediaTypeStatement, statement)
	if err == nil {
		bd, err = b.put(evidence.MediaTypeSigstoreBundle, bundle)
	}
	objsStaged := b.staged
	b.staged = nil
	defer b.discard(objsStaged) // a no-op once synced: syncLocked discards what it was given
	var st *staged
	if err == nil {
		var entry []byte
		if entry, err = attestationEntry(subject, bd.Digest, sd); err == nil {
			st, err = s.stage(entry, false)
		}
	}
	if st != nil {
		defer st.discard(s)
	}
	m := <-dirc
	if m.err != nil {
		return sd, bd, m.err
	}
	defer unix.Close(m.dir.fd)
	if err != nil {
		m.synced() // releases what it holds; the directories stay, empty
		return sd, bd, err
	}
	// The store path is checked while the objects are made durable, as PutIndex checks it
	// before its commit: the entry is not published into a store the path no longer names.
	rootc := make(chan error, 1)
	go func() { rootc <- s.checkRoot() }()
	err = b.syncLocked(objsStaged, st.sync, m.synced)
	if rerr := <-rootc; rerr != nil {
		return sd, bd, rerr
	}
	if err != nil {
		return sd, bd, err
	}
	return sd, bd, s.placeAttestation(m.dir.fd, subject, bd.Digest, sd, st)
}

func attestationEntry(subject, bundle digest.Digest, statement evidence.Descriptor) ([]byte, error) {
	for _, d := range []digest.Digest{subject, bundle, statement.Digest} {
		if _, err := evidence.ParseDigest(string(d)); err != nil {
			return nil, err
		}
	}
	return evidence.MarshalRecord(statement)
}

// placeAttestation renames the synced staged entry st into the held subject directory dirfd and
// syncs it. An entry already there is a no-op when it names the same statement. The caller has
// checked the store path (checkRoot) since it staged st; the check is repeated once the entry is
// in place, as PutIndex repeats it.
func (s *Store) placeAttestation(dirfd int, subject, bundle digest.Digest, statement evidence.Descriptor, st *staged) error {
	if commitHook != nil {
		commitHook()
	}
	present := func() (bool, error) {
		es, err := s.listAttestations(subject)
		if err != nil {
			return false, err
		}
		for _, e := range es {
			if e.Bundle == bundle {
				if e.Statement != statement {
					return false, refuse.New(CodeIndexConflict, "attestation index entry %s/%s exists with another statement", subject.Encoded(), bundle.Encoded())
				}
				return true, nil
			}
		}
		return false, nil
	}
	leaf := deploylog.Leaf{Kind: deploylog.KindAttestation, Key: subject, Bundle: bundle, Record: statement.Digest}
	return s.publish(leaf, present, nil, func() error { return s.renameAttestation(dirfd, subject, bundle, statement, st) })
}

// renameAttestation is placeAttestation's rename, under the publication lock.
func (s *Store) renameAttestation(dirfd int, subject, bundle digest.Digest, statement evidence.Descriptor, st *staged) error {
	err := s.link(st, dirfd, bundle.Encoded())
	if err == nil {
		if err := unix.Fsync(dirfd); err != nil {
			return refuse.Wrap(CodeStoreIO, err, "fsync %s/%s", attestationsRel, subject.Encoded())
		}
		return s.withdrawIfMoved(dirfd, bundle.Encoded(), "attestation index entry "+subject.Encoded()+"/"+bundle.Encoded())
	}
	if !errors.Is(err, errExists) {
		return err
	}
	es, lerr := s.listAttestations(subject)
	if lerr != nil {
		return lerr
	}
	for _, e := range es {
		if e.Bundle == bundle && e.Statement == statement {
			return nil
		}
	}
	return refuse.New(CodeIndexConflict, "attestation index entry %s/%s exists with another statement", subject.Encoded(), bundle.Encoded())
}

// ListAttestations returns every attestation entry of subject, sorted by bundle digest; none
// when the subject has no attestation. Each entry is held to the rules of GetIndex.
func (s *Store) ListAttestations(subject digest.Digest) ([]AttestationEntry, error) {
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	return s.listAttestations(subject)
}

func (s *Store) listAttestations(subject digest.Digest) ([]AttestationEntry, error) {
	if _, err := evidence.ParseDigest(string(subject)); err != nil {
		return nil, err
	}
	dir, ok, synced, err := s.attestationDir(subject, false)
	synced() // nothing was made: releases only
	if err != nil || !ok {
		return []AttestationEntry{}, err
	}
	defer unix.Close(dir.fd)
	rel := attestationsRel + "/" + subject.Encoded()
	names, err := listDir(dir.fd, rel)
	if err != nil {
		return nil, err
	}
	out := []AttestationEntry{}
	for _, name := range names {
		bundle, err := evidence.ParseDigest("sha256:" + name)
		if err != nil {
			return nil, refuse.Wrap(CodeIndexCorrupt, err, "attestation index of %s has a stray entry", subject)
		}
		fd, size, err := openObjectFD(dir.fd, name, bundle)
		if err != nil {
			return nil, refuse.Wrap(CodeIndexCorrupt, err, "attestation index entry %s/%s", subject.Encoded(), name)
		}
		d, err := decodeEntry(plainFile(fd), size, "attestation index entry "+subject.Encoded()+"/"+name)
		closeRaw(fd)
		if err != nil {
			return nil, err
		}
		out = append(out, AttestationEntry{Subject: subject, Bundle: bundle, Statement: d})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Bundle < out[j].Bundle })
	return out, nil
}
