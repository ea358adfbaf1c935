package audit

import (
	"fmt"
	"math"
	"strconv"
	"testing"

	"github.com/qinglong/ql3/refuse"
)

func TestCanonicalDecimal(t *testing.T) {
	vectors := []struct {
		s     string // the recorded digits
		limit uint64 // the largest value the place allows
		canon bool   // whether FormatUint writes exactly s for a value up to limit
	}{
		{"0", 10, true},
		{"3", 10, true},
		{"10", 10, true},
		{"11", 10, false},
		{"2147483647", math.MaxInt32, true},
		{"2147483648", math.MaxInt32, false},
		{"4294967295", math.MaxUint32, true},
		{"4294967296", math.MaxUint32, false},
		{"18446744073709551615", math.MaxUint64, true},
		{"18446744073709551616", math.MaxUint64, false},
		{"000000000000000000001", math.MaxUint64, false},
		{"", 10, false},
		{"00", 10, false},
		{"012", 100, false},
		{"+1", 10, false},
		{"-1", 10, false},
		{" 1", 10, false},
		{"1 ", 10, false},
		{"1_0", 100, false},
		{"0x1", 100, false},
		{"١", 10, false}, // an Arabic-Indic digit
	}
	for _, v := range vectors {
		n, canon := canonicalDecimal(v.s, v.limit)
		if canon != v.canon {
			t.Errorf("canonicalDecimal(%q, %d) canon %v, want %v", v.s, v.limit, canon, v.canon)
		}
		if canon && strconv.FormatUint(n, 10) != v.s {
			t.Errorf("canonicalDecimal(%q) = %d, which formats otherwise", v.s, n)
		}
	}
}

func TestCheckArgvForm(t *testing.T) {
	const kc = "--kubeconfig=/tmp/ql3-kubectl-1854276772/kubeconfig"
	vectors := []struct {
		name string   // the deviation
		argv []string // the recorded argv (the global flags CheckInvocation has already fixed)
		ok   bool     // the form the ceremony writes
	}{
		{"as recorded", []string{"/proc/self/fd/9", kc}, true},
		{"lowest descriptor", []string{"/proc/self/fd/3", kc}, true},
		{"largest descriptor", []string{"/proc/self/fd/2147483647", kc}, true},
		{"largest directory number", []string{"/proc/self/fd/9", "--kubeconfig=/tmp/ql3-kubectl-18446744073709551615/kubeconfig"}, true},
		{"a directory number of os.MkdirTemp (older stores)", []string{"/proc/self/fd/9", "--kubeconfig=/tmp/ql3-kubectl-4294967295/kubeconfig"}, true},
		{"directory number 0", []string{"/proc/self/fd/9", "--kubeconfig=/tmp/ql3-kubectl-0/kubeconfig"}, true},
		{"leading zero", []string{"/proc/self/fd/012", kc}, false},
		{"descriptor 09", []string{"/proc/self/fd/09", kc}, false},
		{"stdin", []string{"/proc/self/fd/0", kc}, false},
		{"stderr", []string{"/proc/self/fd/2", kc}, false},
		{"descriptor beyond a C int", []string{"/proc/self/fd/2147483648", kc}, false},
		{"signed descriptor", []string{"/proc/self/fd/+9", kc}, false},
		{"no descriptor", []string{"/proc/self/fd/", kc}, false},
		{"a path", []string{"/usr/bin/kubectl", kc}, false},
		{"directory with a leading zero", []string{"/proc/self/fd/9", "--kubeconfig=/tmp/ql3-kubectl-01854276772/kubeconfig"}, false},
		{"directory number beyond uint64", []string{"/proc/self/fd/9", "--kubeconfig=/tmp/ql3-kubectl-18446744073709551616/kubeconfig"}, false},
		{"directory without a number", []string{"/proc/self/fd/9", "--kubeconfig=/tmp/ql3-kubectl-/kubeconfig"}, false},
		{"directory of another name", []string{"/proc/self/fd/9", "--kubeconfig=/tmp/kubectl-1/kubeconfig"}, false},
		{"no kubeconfig flag", []string{"/proc/self/fd/9", "--context=x"}, false},
		{"kubeconfig at the root", []string{"/proc/self/fd/9", "--kubeconfig=/kubeconfig"}, false},
		{"argv of one element", []string{"/proc/self/fd/9"}, false},
		{"empty argv", nil, false},
	}
	for _, v := range vectors {
		err := checkArgvForm(v.argv)
		if v.ok != (err == nil) {
			t.Errorf("%s: checkArgvForm(%q) = %v", v.name, v.argv, err)
		}
		if err != nil && refuse.CodeOf(err) != CodeArgvForm {
			t.Errorf("%s: code %s, want %s", v.name, refuse.CodeOf(err), CodeArgvForm)
		}
	}
}

func TestExecTime(t *testing.T) {
	vectors := []struct {
		s  string // a recorded time
		ok bool   // as the ceremony's stamp writes an instant
	}{
		{"2026-12-03T07:16:31.16433926Z", true},
		{"2026-12-03T07:16:31.181846667Z", true},
		{"2001-02-03T04:05:06Z", true},
		{"2026-12-03T07:16:31.164339260Z", false},
		{"2026-12-03T07:16:31.000Z", false},
		{"2026-12-03T07:16:31+00:00", false},
		{"2026-12-03T08:16:31+01:00", false},
		{"2026-12-03t07:16:31Z", false},
		{"2026-12-03 07:16:31Z", false},
		{"2026-12-03T07:16:31.1234567891Z", false},
		{"2026-12-03T07:16:31", false},
		{"", false},
		{"2026-12-03T07:16:31Zx", false},
	}
	for _, v := range vectors {
		if _, err := execTime(v.s); v.ok != (err == nil) {
			t.Errorf("execTime(%q) = %v", v.s, err)
		}
	}
}

// TestExecTimesOrder: equal instants are in order, as a coarse clock records them; the first
// exec has nothing before it.
func TestExecTimesOrder(t *testing.T) {
	run := func(start, finish string) *execRun {
		r := &execRun{}
		r.rec.StartedAt, r.rec.FinishedAt = start, finish
		return r
	}
	const a, b, c = "2026-12-03T07:16:30Z", "2026-12-03T07:16:31Z", "2026-12-03T07:16:32Z"
	vectors := []struct {
		name  string
		times [][2]string // startedAt, finishedAt of each exec in chain order
		ok    bool
	}{
		{"one exec", [][2]string{{a, b}}, true},
		{"instantaneous", [][2]string{{a, a}}, true},
		{"back to back", [][2]string{{a, b}, {b, c}}, true},
		{"finished before started", [][2]string{{b, a}}, false},
		{"overlapping", [][2]string{{a, c}, {b, c}}, false},
		{"reversed", [][2]string{{b, c}, {a, b}}, false},
	}
	for _, v := range vectors {
		var execs []chainExec
		for i, tm := range v.times {
			execs = append(execs, chainExec{fmt.Sprintf("exec %d", i), run(tm[0], tm[1])})
		}
		_, err := execTimes(execs)
		if v.ok != (err == nil) || (err != nil && refuse.CodeOf(err) != CodeExecTime) {
			t.Errorf("%s: %v", v.name, err)
		}
	}
}
