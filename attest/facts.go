package attest

import (
	"fmt"
	"reflect"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
)

// CodeSubjectKind: the digest to attest or to verify names neither a receipt, a preflight report
// nor a live-audit report, or a record it names is not of the media type its place requires.
const CodeSubjectKind refuse.Code = "ATTEST_SUBJECT_KIND"

// Derive returns the facts of the predicate for the record subject, read from that record and
// the command record it names; QL3Version is left empty (it is the attesting tool's claim).
// Derive checks nothing the auditor checks: callers attest or verify an audited record.
func Derive(src Source, subject digest.Digest) (evidence.Predicate, error) {
	b, err := src.Get(subject)
	if err != nil {
		return evidence.Predicate{}, err
	}
	var r evidence.Receipt
	err = evidence.DecodeRecord(evidence.MediaTypeReceipt, b, &r)
	if err == nil {
		p, err := derive(src, evidence.AttestedReceipt, evidence.MediaTypeReceipt, r.Command, r.Target, r.Lock,
			r.ClusterUID, r.Manifest, r.LockReport)
		recovered := r.Recovered
		p.Recovered = &recovered
		return p, err
	}
	if refuse.CodeOf(err) != evidence.CodeRecordSchemaMismatch {
		return evidence.Predicate{}, refuse.Wrap(CodeSubjectKind, err, "subject %s is not a well-formed record", subject)
	}
	var la evidence.LiveAudit
	if err := evidence.DecodeRecord(evidence.MediaTypeLiveAudit, b, &la); err == nil {
		p, err := derive(src, AttestedLiveAudit, evidence.MediaTypeLiveAudit, la.Command, la.Target, la.Lock,
			la.ClusterUID, la.Manifest, la.LockReport)
		p.LiveAudit = LiveAuditDrifted
		if la.Converged {
			p.LiveAudit = LiveAuditConverged
		}
		return p, err
	} else if refuse.CodeOf(err) != evidence.CodeRecordSchemaMismatch {
		return evidence.Predicate{}, refuse.Wrap(CodeSubjectKind, err, "subject %s is not a well-formed record", subject)
	}
	var pf evidence.Preflight
	if err := evidence.DecodeRecord(evidence.MediaTypePreflight, b, &pf); err != nil {
		return evidence.Predicate{}, refuse.Wrap(CodeSubjectKind, err, "subject %s is neither a receipt, a preflight report nor a live-audit report", subject)
	}
	return derive(src, evidence.AttestedPreflight, evidence.MediaTypePreflight, pf.Command, pf.Target, pf.Lock,
		pf.ClusterUID, pf.Manifest, pf.LockReport)
}

// A live-audit report is attested like a receipt, with its verdict as the liveAudit fact: a
// signed live audit cannot be rewritten (its digest is the statement's subject), and a verifier
// derives the verdict again from the report.
const (
	// AttestedLiveAudit is the record fact of a live-audit report's statement.
	AttestedLiveAudit = "live-audit"
	// LiveAuditConverged and LiveAuditDrifted are its liveAudit fact: the report's converged.
	LiveAuditConverged = "converged"
	LiveAuditDrifted   = "drifted"
)

func derive(src Source, kind, mediaType string, command evidence.Descriptor, target digest.Digest,
	lock evidence.LockBinding, clusterUID string, manifest, lockReport evidence.Descriptor) (evidence.Predicate, error) {
	if command.MediaType != evidence.MediaTypeCommand {
		return evidence.Predicate{}, refuse.New(CodeSubjectKind, "the %s's command descriptor has media type %s", kind, refuse.Ident(command.MediaType))
	}
	cb, err := src.GetDescriptor(command)
	if err != nil {
		return evidence.Predicate{}, err
	}
	var c evidence.Command
	if err := evidence.DecodeRecord(evidence.MediaTypeCommand, cb, &c); err != nil {
		return evidence.Predicate{}, err
	}
	return evidence.Predicate{
		Record: kind, MediaType: mediaType, Command: command.Digest, Target: target,
		ReleaseVersion: lock.ReleaseVersion, ReleaseSet: lock.ReleaseSet,
		CatalogDigest: lock.CatalogDigest, CatalogCommit: lock.CatalogCommit,
		ClusterUID: clusterUID, Context: c.Kubeconfig.Context,
		ManifestDigest: manifest.Digest, LockReportDigest: lockReport.Digest,
	}, nil
}

// diffFacts describes the first fact in which got differs from want (its member name and both
// values, which are digests, versions and names, never credentials), or "" when none does.
// QL3Version is not compared: it is the attesting tool's claim, not a fact of the record.
func diffFacts(want, got evidence.Predicate) string {
	got.QL3Version = want.QL3Version
	wv, gv := reflect.ValueOf(want), reflect.ValueOf(got)
	for i := 0; i < wv.NumField(); i++ {
		w, g := wv.Field(i), gv.Field(i)
		if w.Kind() == reflect.Pointer {
			if w.IsNil() != g.IsNil() || (!w.IsNil() && w.Elem().Interface() != g.Elem().Interface()) {
				return fmt.Sprintf("%s is %s, the record shows %s", jsonName(wv.Type().Field(i)), show(g), show(w))
			}
			continue
		}
		if w.Interface() != g.Interface() {
			return fmt.Sprintf("%s is %s, the record shows %s", jsonName(wv.Type().Field(i)), show(g), show(w))
		}
	}
	return ""
}

func show(v reflect.Value) string {
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return "absent"
		}
		v = v.Elem()
	}
	return refuse.Ident(fmt.Sprint(v.Interface()))
}

func jsonName(f reflect.StructField) string {
	tag := f.Tag.Get("json")
	for i := 0; i < len(tag); i++ {
		if tag[i] == ',' {
			return tag[:i]
		}
	}
	return tag
}
