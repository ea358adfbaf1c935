package audit

import (
	"fmt"
	"time"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
)

// CodeRecordTime: a record's own time (a preflight report's, receipt's or live-audit report's
// startedAt and finishedAt, an intent's createdAt) is not in canonical form or is not bound to the
// times of its exec records, or a record's execs ran before the record it was made from finished.
const CodeRecordTime refuse.Code = "AUDIT_RECORD_TIME"

// MaxRecordLag bounds how far a record's own times may lie from its exec records' times: the
// ceremony stamps startedAt before it reads its inputs and hashes kubectl, and finishedAt after
// the last exec, the plan and the final re-verification of every input. Those take well under a
// minute even for a 1,000-object release on a loaded machine; ten minutes leaves room for a slow
// disk and never for a forged year. It also bounds the clock skew tolerated between two hosts
// when one record's execs must follow another record's (a preflight after the receipt its plan
// names, a live audit after its receipt).
const MaxRecordLag = 10 * time.Minute

// span is one record's own times and the exec records they must enclose.
type span struct {
	where             string // "receipt", "preflight report", ...
	started, finished string // "" for a record that has only one time (an intent's createdAt)
	runs              []execRun
}

// bind checks that the record's times are canonical, that startedAt is at most MaxRecordLag
// before its first exec started and not after it, and that finishedAt is not before its last
// exec finished and at most MaxRecordLag after it.
func (s span) bind() error {
	if len(s.runs) == 0 {
		return nil
	}
	first, err := execTime(s.runs[0].rec.StartedAt)
	if err != nil {
		return refuse.New(CodeExecTime, "%s exec 0 startedAt: %v", s.where, err)
	}
	last, err := execTime(s.runs[len(s.runs)-1].rec.FinishedAt)
	if err != nil {
		return refuse.New(CodeExecTime, "%s exec %d finishedAt: %v", s.where, len(s.runs)-1, err)
	}
	if s.started != "" {
		st, err := execTime(s.started)
		if err != nil {
			return refuse.New(CodeRecordTime, "%s startedAt: %v", s.where, err)
		}
		if st.After(first) || first.Sub(st) > MaxRecordLag {
			return refuse.New(CodeRecordTime, "%s startedAt %s is not within %s before its first exec started (%s)", s.where, s.started, MaxRecordLag, s.runs[0].rec.StartedAt)
		}
	}
	fin, err := execTime(s.finished)
	if err != nil {
		return refuse.New(CodeRecordTime, "%s finishedAt: %v", s.where, err)
	}
	if fin.Before(last) || fin.Sub(last) > MaxRecordLag {
		return refuse.New(CodeRecordTime, "%s finishedAt %s is not within %s after its last exec finished (%s)", s.where, shortTime(s.finished), MaxRecordLag, s.runs[len(s.runs)-1].rec.FinishedAt)
	}
	return nil
}

// follows refuses execs that started more than MaxRecordLag before the record they were made
// from (whose execs are before) finished its last exec: a record cannot be made from a later one.
func follows(where string, runs []execRun, beforeWhere string, before []execRun) error {
	if len(runs) == 0 || len(before) == 0 {
		return nil
	}
	start, err1 := execTime(runs[0].rec.StartedAt)
	end, err2 := execTime(before[len(before)-1].rec.FinishedAt)
	if err1 != nil || err2 != nil {
		return refuse.New(CodeExecTime, "%s or %s has an exec time not in canonical form", where, beforeWhere)
	}
	if end.Sub(start) > MaxRecordLag {
		return refuse.New(CodeRecordTime, "%s's first exec started at %s, %s before %s, which it was made from, finished its last at %s",
			where, runs[0].rec.StartedAt, end.Sub(start).Round(time.Second), beforeWhere, before[len(before)-1].rec.FinishedAt)
	}
	return nil
}

// recordTimes is the "record times" check: every span bound, then every ordering pair.
func (a *auditor) recordTimes(name string, spans []span, order func() error) {
	a.check(name, func() (string, error) {
		for _, s := range spans {
			if err := s.bind(); err != nil {
				return "", err
			}
		}
		if order != nil {
			if err := order(); err != nil {
				return "", err
			}
		}
		return fmt.Sprintf("%d records' own times within %s of their exec records' times", len(spans), MaxRecordLag), nil
	})
}

// previousRuns loads the exec records of the receipt a preflight's plan names, for the order
// check; nil when the preflight stored no plan or a record cannot be read (the plan check reports
// that one).
func (a *auditor) previousRuns(p *evidence.Preflight) []execRun {
	if p.Plan == nil {
		return nil
	}
	var pl evidence.Plan
	if a.load(*p.Plan, evidence.MediaTypePlan, &pl) != nil || pl.Previous.MediaType != evidence.MediaTypeReceipt {
		return nil
	}
	var prev evidence.Receipt
	if a.load(pl.Previous, evidence.MediaTypeReceipt, &prev) != nil || len(prev.Execs) == 0 {
		return nil
	}
	var last execRun
	if a.load(prev.Execs[len(prev.Execs)-1], evidence.MediaTypeExec, &last.rec) != nil {
		return nil
	}
	return []execRun{last}
}

// intentTime binds an intent's createdAt: written after the dry-run it holds finished (this run's,
// or the earlier attempt's in a recovery), at most MaxRecordLag after it, and before the receipt's
// apply started (in a recovery, before the recovering run's first exec: it read the intent first).
func intentTime(in *evidence.Intent, recovered bool, earlier, runs []execRun) error {
	held, next := runs[:min(2, len(runs))], runs[min(2, len(runs)):]
	if recovered {
		held, next = earlier, runs
	}
	if len(held) == 0 || len(next) == 0 {
		return nil
	}
	at, err := execTime(in.CreatedAt)
	if err != nil {
		return refuse.New(CodeRecordTime, "intent createdAt: %v", err)
	}
	dry, err1 := execTime(held[len(held)-1].rec.FinishedAt)
	apply, err2 := execTime(next[0].rec.StartedAt)
	if err1 != nil || err2 != nil {
		return refuse.New(CodeExecTime, "an exec time around the intent is not in canonical form")
	}
	if at.Before(dry) || at.Sub(dry) > MaxRecordLag || at.After(apply) {
		return refuse.New(CodeRecordTime, "intent createdAt %s is not between its dry-run's end (%s, at most %s before) and the start of the %s (%s)",
			shortTime(in.CreatedAt), held[len(held)-1].rec.FinishedAt, MaxRecordLag, next[0].rec.Step, next[0].rec.StartedAt)
	}
	return nil
}
