package audit

import (
	"fmt"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/refuse"
)

// Each exec record of a chain stands for one kubectl process: the ceremony runs every step once,
// in a directory os.MkdirTemp made for it alone, one step after the other and the preflight
// before the apply. The checks of this file hold a chain (its preflight's execs, a recovered
// intent's, the receipt's) to that, so that one process's evidence cannot be presented as two.
const (
	// CodeExecReused: one exec record stands for two runs of the chain.
	CodeExecReused refuse.Code = "AUDIT_EXEC_REUSED"
	// CodeExecRunDir: two distinct exec records claim the same private run directory.
	CodeExecRunDir refuse.Code = "AUDIT_EXEC_RUN_DIR_SHARED"
	// CodeExecTime: an exec time is not canonical RFC 3339 UTC, or the execs of the chain are not
	// in time order.
	CodeExecTime refuse.Code = "AUDIT_EXEC_TIME_ORDER"
)

// chainPart is the execs one record of the chain holds, loaded and shape-checked by execsCheck.
type chainPart struct {
	prefix string // "preflight.", "intent." or "" for the subject
	runs   []execRun
}

// chainExec is one exec of the chain, in chain order, with where it stands for messages.
type chainExec struct {
	where string
	run   *execRun
}

func flatten(parts []chainPart) []chainExec {
	var out []chainExec
	for _, p := range parts {
		for i := range p.runs {
			out = append(out, chainExec{fmt.Sprintf("%sexec %d (%s)", p.prefix, i, p.runs[i].rec.Step), &p.runs[i]})
		}
	}
	return out
}

// chainChecks runs the three checks over parts, given in chain order: preflight, then a
// recovered intent's earlier attempt, then the receipt.
func (a *auditor) chainChecks(parts []chainPart) {
	execs := flatten(parts)
	a.check("exec reuse", func() (string, error) { return execReuse(execs) })
	a.check("run directories", func() (string, error) { return runDirs(execs) })
	a.check("exec times", func() (string, error) { return execTimes(execs) })
}

// execReuse refuses an exec record that appears twice in the chain. A straight receipt's intent
// holds the receipt's own first two records: parts never list them twice.
func execReuse(execs []chainExec) (string, error) {
	seen := map[digest.Digest]string{}
	for _, e := range execs {
		if first, ok := seen[e.run.desc.Digest]; ok {
			return "", refuse.New(CodeExecReused, "%s is exec record %s, already %s: one kubectl run cannot be two", e.where, e.run.desc.Digest, first)
		}
		seen[e.run.desc.Digest] = e.where
	}
	return fmt.Sprintf("%d exec records, each used once", len(execs)), nil
}

// runDirs refuses two distinct exec records in one run directory. The directory is MkdirTemp's,
// made for one run and removed after it; a name drawn twice in one chain is a one in 2^32 event
// per pair.
func runDirs(execs []chainExec) (string, error) {
	seen := map[string]chainExec{}
	for _, e := range execs {
		dir, ok := runDir(e.run.rec.Argv)
		if !ok {
			return "", refuse.New(CodeExecRunDir, "%s names no run directory", e.where)
		}
		if first, ok := seen[dir]; ok && first.run.desc.Digest != e.run.desc.Digest {
			return "", refuse.New(CodeExecRunDir, "%s and %s claim the same private run directory", first.where, e.where)
		}
		seen[dir] = e
	}
	return fmt.Sprintf("%d private run directories, each claimed by one exec record", len(seen)), nil
}

// execTimes requires every exec time in the form the ceremony writes (RFC 3339 UTC with
// nanoseconds, trailing zeros dropped), each exec to finish no earlier than it started, and each
// to start no earlier than the previous one finished. Only the order is checked: the times
// themselves are the recording host's clock.
func execTimes(execs []chainExec) (string, error) {
	var prev time.Time
	var prevWhere string
	for _, e := range execs {
		start, err := execTime(e.run.rec.StartedAt)
		if err != nil {
			return "", refuse.New(CodeExecTime, "%s startedAt: %v", e.where, err)
		}
		finish, err := execTime(e.run.rec.FinishedAt)
		if err != nil {
			return "", refuse.New(CodeExecTime, "%s finishedAt: %v", e.where, err)
		}
		if finish.Before(start) {
			return "", refuse.New(CodeExecTime, "%s finished at %s, before it started at %s", e.where, e.run.rec.FinishedAt, e.run.rec.StartedAt)
		}
		if prevWhere != "" && start.Before(prev) {
			return "", refuse.New(CodeExecTime, "%s started at %s, before %s finished at %s", e.where, e.run.rec.StartedAt, prevWhere, prev.Format(time.RFC3339Nano))
		}
		prev, prevWhere = finish, e.where
	}
	return fmt.Sprintf("%d execs in time order, each started after the one before finished", len(execs)), nil
}

// execTime parses s, which must be exactly what the ceremony's stamp writes for some instant.
func execTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || t.UTC().Format(time.RFC3339Nano) != s {
		return time.Time{}, fmt.Errorf("%q is not an RFC 3339 UTC time in canonical form", shortTime(s))
	}
	return t, nil
}

// shortTime bounds a recorded time for a message: a hostile record cannot make it long.
func shortTime(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
