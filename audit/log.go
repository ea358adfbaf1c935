package audit

import (
	"fmt"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/deploylog"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
)

// LogProver is an evidence source that proves a record's inclusion in its deployment log (a
// store with a log).
type LogProver interface {
	LogProof(record digest.Digest, v deploylog.CheckpointVerifier) (deploylog.Proof, error)
}

var _ LogProver = (*store.Store)(nil)

// LogInclusion is what the audit showed of the subject's leaf in a deployment log.
type LogInclusion struct {
	Source         string         `json:"source"` // "store" or "proof file"
	Origin         string         `json:"origin"`
	Kind           deploylog.Kind `json:"kind"`
	Index          int64          `json:"index"`
	CheckpointSize int64          `json:"checkpointSize"`
}

// logInclusion makes the subject's inclusion in a trusted checkpoint a check (Options.LogVerifier):
// from the proof file given, or proven from the source's log.
func logInclusion(src Source, rep *Report, opts Options) {
	if opts.LogVerifier == nil {
		return
	}
	var p deploylog.Proof
	var err error
	source := "proof file"
	switch lp, ok := src.(LogProver); {
	case opts.LogProof != nil:
		p, err = deploylog.ParseProof(opts.LogProof)
	case ok:
		source = "store"
		if n, ok := src.(interface{ LogSourceName() string }); ok {
			source = n.LogSourceName() // an OCI layout: its log referrer
		}
		p, err = lp.LogProof(rep.Subject, opts.LogVerifier)
	default:
		err = refuse.New(store.CodeLogNotInitialized, "this evidence source has no deployment log: give a tlog-proof file")
		(&auditor{report: rep}).fail("log inclusion", err)
		rep.finishAgain()
		return
	}
	var leaf deploylog.Leaf
	var cp deploylog.Checkpoint
	if err == nil {
		leaf, cp, err = p.Verify(opts.LogVerifier, rep.Subject)
	}
	if err != nil {
		(&auditor{report: rep}).fail("log inclusion", err)
		rep.finishAgain()
		return
	}
	rep.Log = &LogInclusion{Source: source, Origin: cp.Origin, Kind: leaf.Kind, Index: p.Index, CheckpointSize: cp.Size}
	rep.Checks = append(rep.Checks, Check{Name: "log inclusion", OK: true,
		Detail: fmt.Sprintf("published as leaf %d (%s) of log %s, included in its trusted checkpoint of size %d (%s)", p.Index, leaf.Kind, cp.Origin, cp.Size, source)})
	rep.NotChecked = append(rep.NotChecked, "deployment log: inclusion shows this record was published in the log before its checkpoint was signed; it does not show that nothing was published elsewhere (a ceremony run against another store), nor anything after that checkpoint")
	rep.finishAgain()
}
