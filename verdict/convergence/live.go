package convergence

import (
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/evidence/lock"
	"github.com/qinglong/ql3/refuse"
)

// CodeReadFailed: the convergence read exited non-zero (and, in a live audit, shows no missing
// object that would explain it).
const CodeReadFailed refuse.Code = "CONVERGENCE_READ_FAILED"

// JudgeLive judges the convergence read of a live audit: one finding per object of the verified
// lock. A non-zero exit is accepted only when the read shows an object missing (kubectl get exits
// 1 for an object it does not find and prints the others); anything else is a failed read. The
// offline auditor calls it on the stored stdout and exit code.
func JudgeLive(l *lock.Result, receipt []evidence.LiveObject, exit int, stdout []byte, stderrBytes int) ([]Finding, error) {
	return JudgeLiveRules("", l, receipt, exit, stdout, stderrBytes)
}

// CodeJudgeUnknown: a live-audit report names judging rules this ql3 does not know.
const CodeJudgeUnknown refuse.Code = "CONVERGENCE_JUDGE_UNKNOWN"

// JudgeLiveRules is JudgeLive under the rules a live-audit report names (its judge member): ""
// for the rules before issue 22 (the fields the release sets), evidence.LiveJudgeAdditions for
// those and every field another manager added, evidence.LiveJudgeNamespaces for those and the
// namespace read (which JudgeNamespaces applies to the findings: the read is another step). A report is re-judged by the rules it was judged
// by, so a report written before the rules grew still audits.
func JudgeLiveRules(rules string, l *lock.Result, receipt []evidence.LiveObject, exit int, stdout []byte, stderrBytes int) ([]Finding, error) {
	if rules != "" && rules != evidence.LiveJudgeAdditions && rules != evidence.LiveJudgeNamespaces {
		return nil, refuse.New(CodeJudgeUnknown, "live-audit rules %s are not known to this ql3", refuse.Ident(rules))
	}
	fs, err := Judge(Input{Objects: l.Objects, Authorities: l.Authorities,
		FieldManager: evidence.FieldManager, Stdout: stdout, Additions: rules != ""}, receipt)
	if exit != 0 {
		missing := 0
		for _, f := range fs {
			if f.Verdict == evidence.VerdictMissing {
				missing++
			}
		}
		if err != nil || missing == 0 {
			return nil, refuse.New(CodeReadFailed, "convergence read exited %d (%d bytes of stderr stored) and shows no missing object", exit, stderrBytes)
		}
	}
	if err != nil {
		return nil, err
	}
	return fs, nil
}

// Verdicts turns findings into the report's verdicts.
func Verdicts(fs []Finding, receipt []evidence.LiveObject) []evidence.LiveVerdict {
	out := make([]evidence.LiveVerdict, len(fs))
	for i, f := range fs {
		out[i] = evidence.LiveVerdict{APIVersion: f.Object.APIVersion, Kind: f.Object.Kind, Namespace: f.Object.Namespace,
			Name: f.Object.Name, UID: f.Object.UID, ResourceVersion: f.Object.ResourceVersion, ReceiptUID: receipt[i].UID,
			Verdict: f.Verdict, Code: string(f.Code), Path: f.Path, Manager: f.Manager, Live: f.Live, Expected: f.Expected}
		if f.Verdict != evidence.VerdictConverged {
			out[i].Detail = f.Detail
		}
	}
	return out
}
