package store

import (
	"errors"
	"slices"

	"github.com/opencontainers/go-digest"
	"golang.org/x/sys/unix"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
)

// Codes raised only by Verify findings.
const (
	CodeStrayFile       refuse.Code = "STORE_STRAY_FILE"        // a file in blobs/ whose name is not an object name
	CodeDanglingRef     refuse.Code = "STORE_DANGLING_REF"      // a descriptor names an object that is missing or wrong
	CodeStagingLeftover refuse.Code = "STORE_STAGING_LEFTOVER"  // hint: a file left in tmp/ by a crashed write
	CodeUnreferenced    refuse.Code = "STORE_UNREFERENCED"      // hint: an object no index entry reaches
	CodeIntentNoReceipt refuse.Code = "STORE_INTENT_NO_RECEIPT" // hint: a possibly partial mutation
)

// Finding is one result of Verify.
type Finding struct {
	Code refuse.Code `json:"code"`
	Path string      `json:"path"`
	Msg  string      `json:"message"`
}

// Report is the result of Verify: corruption findings are errors, hints are not. Receipts,
// Preflights and Intents list the ceremony roots the index names, so an operator can find every
// published record and every unfinished apply (an intent without a receipt).
type Report struct {
	Objects    int          `json:"objects"`
	Bytes      int64        `json:"bytes"`
	Receipts   []IndexEntry `json:"receipts"`
	Preflights []IndexEntry `json:"preflights"`
	Intents    []IndexEntry `json:"intents"`
	LiveAudits []IndexEntry `json:"liveAudits"`
	// Unfinished are the intents (keyed by apply command digest) that have no receipt: the apply
	// may have mutated the cluster without publishing a receipt; rerunning it recovers.
	Unfinished   []IndexEntry    `json:"unfinished"`
	Unreferenced []digest.Digest `json:"unreferenced"`
	// Attestations counts the entries of the attestation index; their bundles and statements are
	// reached from it like the records the other indexes publish.
	Attestations int       `json:"attestations"`
	Corruption   []Finding `json:"corruption"`
	Hints        []Finding `json:"hints"`
}

// OK is true iff Verify found no corruption.
func (r *Report) OK() bool { return len(r.Corruption) == 0 }

func (r *Report) bad(path string, err error) {
	r.Corruption = append(r.Corruption, Finding{Code: refuse.CodeOf(err), Path: path, Msg: refuse.Detail(err)})
}

// Verify checks every object and index entry and keeps going after a finding.
func (s *Store) Verify() (*Report, error) {
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	r := &Report{Receipts: []IndexEntry{}, Preflights: []IndexEntry{}, Intents: []IndexEntry{}, LiveAudits: []IndexEntry{},
		Unfinished: []IndexEntry{}, Unreferenced: []digest.Digest{}, Corruption: []Finding{}, Hints: []Finding{}}
	good := map[digest.Digest]int64{} // intact objects and their sizes
	names, err := listDir(s.dirs[dBlobs].fd, "blobs")
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		if name != "sha256" {
			r.bad("blobs/"+name, refuse.New(CodeStrayFile, "stray entry in blobs/"))
		}
	}
	if names, err = listDir(s.dirs[dSHA256].fd, "blobs/sha256"); err != nil {
		return nil, err
	}
	for _, name := range names {
		rel := "blobs/sha256/" + name
		d, err := evidence.ParseDigest("sha256:" + name)
		if err != nil {
			r.bad(rel, refuse.New(CodeStrayFile, "stray entry in blobs/sha256/"))
			continue
		}
		r.Objects++
		size, err := checkObject(s.dirs[dSHA256].fd, d)
		if err != nil {
			r.bad(rel, err)
			continue
		}
		good[d] = size
		r.Bytes += size
	}
	if names, err := listDir(s.dirs[dTmp].fd, "tmp"); err == nil {
		for _, name := range names {
			r.Hints = append(r.Hints, Finding{Code: CodeStagingLeftover, Path: "tmp/" + name, Msg: "staging leftover"})
		}
	}
	reached := map[digest.Digest]bool{}
	var walk func(d evidence.Descriptor, from string)
	walk = func(d evidence.Descriptor, from string) {
		size, ok := good[d.Digest]
		if !ok {
			if _, bad := s.get(d.Digest); refuse.CodeOf(bad) == CodeObjectNotFound {
				r.bad(from, refuse.New(CodeDanglingRef, "descriptor names missing object %s", d.Digest))
			}
			return
		}
		if size != d.Size {
			r.bad(from, refuse.New(CodeObjectSize, "object %s has %d bytes, descriptor says %d", d.Digest, size, d.Size))
			return
		}
		if reached[d.Digest] {
			return
		}
		reached[d.Digest] = true
		if _, isRec := evidence.RecordSchema(d.MediaType); !isRec {
			return
		}
		// Records are small: read (and re-hash) again rather than keep every object in memory.
		b, err := s.get(d.Digest)
		if err != nil {
			r.bad(from, err)
			return
		}
		if err := checkRecord(d.MediaType, b); err != nil {
			r.bad(from, err)
			return
		}
		ds, err := evidence.Descriptors(b)
		if err != nil {
			r.bad(from, err)
			return
		}
		for _, c := range ds {
			walk(c, "blobs/sha256/"+d.Digest.Encoded())
		}
	}
	receipts := map[digest.Digest]bool{}
	for _, kind := range []string{evidence.IndexReceipts, evidence.IndexIntents, evidence.IndexPreflights, evidence.IndexLiveAudits} {
		es, err := s.listIndex(kind)
		if err != nil {
			r.bad("index/"+kind, err)
			continue
		}
		for _, e := range es {
			walk(e.Descriptor, "index/"+kind+"/"+e.Key.Encoded())
			switch kind {
			case evidence.IndexReceipts:
				r.Receipts = append(r.Receipts, e)
				receipts[e.Key] = true
			case evidence.IndexIntents:
				r.Intents = append(r.Intents, e)
			case evidence.IndexLiveAudits:
				r.LiveAudits = append(r.LiveAudits, e)
			default:
				r.Preflights = append(r.Preflights, e)
			}
		}
	}
	s.verifyAttestations(r, walk, good)
	for _, e := range r.Intents {
		if !receipts[e.Key] {
			r.Unfinished = append(r.Unfinished, e)
			r.Hints = append(r.Hints, Finding{Code: CodeIntentNoReceipt, Path: "index/intents/" + e.Key.Encoded(),
				Msg: "apply intent without receipt: the cluster may be partially applied; rerun the apply command to recover"})
		}
	}
	for d := range good {
		if !reached[d] {
			r.Unreferenced = append(r.Unreferenced, d)
		}
	}
	slices.Sort(r.Unreferenced)
	for _, d := range r.Unreferenced {
		r.Hints = append(r.Hints, Finding{Code: CodeUnreferenced, Path: "blobs/sha256/" + d.Encoded(),
			Msg: "unreferenced object: no published record reaches it (evidence of a refused or interrupted run)"})
	}
	return r, nil
}

// verifyAttestations walks index/attestations/<subject>/<bundle>: every entry is read under the
// index rules, and its bundle and statement are reached from it, so that signed evidence is never
// reported as unreferenced.
func (s *Store) verifyAttestations(r *Report, walk func(evidence.Descriptor, string), good map[digest.Digest]int64) {
	var st unix.Stat_t
	if err := unix.Fstatat(s.dirs[dIndex].fd, evidence.IndexAttestations, &st, unix.AT_SYMLINK_NOFOLLOW); errors.Is(err, unix.ENOENT) {
		return
	}
	dir, err := openDir(s.dirs[dIndex].fd, evidence.IndexAttestations, attestationsRel)
	if err != nil {
		r.bad(attestationsRel, err)
		return
	}
	subjects, err := listDir(dir.fd, attestationsRel)
	unix.Close(dir.fd)
	if err != nil {
		r.bad(attestationsRel, err)
		return
	}
	for _, name := range subjects {
		rel := attestationsRel + "/" + name
		subject, err := evidence.ParseDigest("sha256:" + name)
		if err != nil {
			r.bad(rel, refuse.New(CodeStrayFile, "stray entry in %s/", attestationsRel))
			continue
		}
		es, err := s.listAttestations(subject)
		if err != nil {
			r.bad(rel, err)
			continue
		}
		for _, e := range es {
			from := rel + "/" + e.Bundle.Encoded()
			r.Attestations++
			walk(evidence.Descriptor{MediaType: evidence.MediaTypeSigstoreBundle, Digest: e.Bundle, Size: good[e.Bundle]}, from)
			walk(e.Statement, from)
		}
	}
}
