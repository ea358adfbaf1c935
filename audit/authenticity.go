package audit

import (
	"fmt"
	"strings"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/attest"
	"github.com/qinglong/ql3/deploylog"
)

// authenticityUnsigned is the notChecked line of an audit that verifies no attestation.
const authenticityUnsigned = "authenticity: nothing in the store is signed; kubectl's stored output is judged only for the verdicts above, and a consistent rewrite of the whole chain by someone who can write the store is not detectable offline"

// Options refine an audit.
type Options struct {
	// Target, when set, is the target the subject must bind (a receipt.audit command's).
	Target digest.Digest
	// Keys are the trusted public keys: at least one attestation of the subject must verify
	// against one of them, and none signed by them may state something false.
	Keys []*attest.PublicKey
	// LogVerifier, when set, makes the subject's inclusion in a trusted checkpoint of its
	// deployment log a check (docs/log.md): proven from LogProof (a tlog-proof file's bytes) when
	// given, else from the source's own log.
	LogVerifier deploylog.CheckpointVerifier
	LogProof    []byte
}

// AuditWith audits subject with opts: the record checks of Audit, then its attestations.
func AuditWith(src Source, subject digest.Digest, opts Options) (*Report, error) {
	rep, err := audit(src, subject, opts.Target)
	if err != nil {
		return rep, err
	}
	if rep.Kind == "unknown" {
		pruned(src, rep, opts)
		return rep, nil
	}
	authenticity(src, rep, opts.Keys)
	logInclusion(src, rep, opts)
	return rep, nil
}

// authenticity lists the subject's attestations in the report and, with keys, makes their
// verification a check. The notChecked line says exactly what the audit could not bind.
func authenticity(src Source, rep *Report, keys []*attest.PublicKey) {
	asrc, ok := src.(attest.Source)
	if !ok {
		if len(keys) > 0 {
			rep.Checks = append(rep.Checks, Check{Name: "authenticity", OK: false, Code: attest.CodeNotFound,
				Detail: "this evidence source carries no attestation index"})
			rep.finishAgain()
		}
		return
	}
	res, err := attest.Verify(asrc, rep.Subject, keys)
	if res != nil && (len(res.Attestations) > 0 || len(keys) > 0) {
		rep.Attestations = res // absent from a report of an unsigned record audited without keys
	}
	if len(keys) == 0 {
		n := 0
		if res != nil {
			n = len(res.Attestations)
		}
		if n > 0 {
			rep.replaceNotChecked("authenticity: ", fmt.Sprintf("authenticity: %d attestation(s) of the subject found, none verified (no --key given); without a verified one, a consistent rewrite of the whole chain by someone who can write the store is not detectable offline", n))
		}
		return
	}
	if err != nil {
		(&auditor{report: rep}).fail("authenticity", err)
		rep.finishAgain()
		return
	}
	c := Check{Name: "authenticity", OK: true}
	{
		c.Detail = fmt.Sprintf("%d of %d attestation(s) verified by a given key; the signed statement is the stored one, names this record and states what the audit re-derived", res.Verified, len(res.Attestations))
		rep.replaceNotChecked("authenticity: ", "authenticity: verified for the facts the statement carries; whoever holds a trusted key could sign a false chain, so the keys are what is trusted")
	}
	rep.Checks = append(rep.Checks, c)
	rep.finishAgain()
}

func (r *Report) replaceNotChecked(prefix, line string) {
	for i, n := range r.NotChecked {
		if strings.HasPrefix(n, prefix) {
			r.NotChecked[i] = line
		}
	}
}

// finishAgain recomputes OK and Code after a check was added.
func (r *Report) finishAgain() {
	a := &auditor{report: r}
	r.OK, r.Code = false, ""
	a.finish()
}
