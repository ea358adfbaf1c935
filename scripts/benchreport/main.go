// Command benchreport reads the output of `go test -bench` (one or more runs, -count N) on stdin
// and prints the table of ql3's speed goals (docs/issues.md#issue-21): for each figure the value of every run,
// the median, the goal and whether it is met. Each figure is a metric that one benchmark measures
// side by side with its reference in the same iterations, so load from elsewhere on the machine
// weighs on both alike. `make bench` pipes its run into it; docs/testbed.md explains the figures.
//
// The deployment log's benchmarks in store/ and history's of 10,000 publications are rows of the
// table by name; those of package deploylog (and below it) are listed after the table as measured.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

// goal is one row of the table.
type goal struct {
	figure string  // what is measured
	bench  string  // benchmark name without the -GOMAXPROCS suffix
	metric string  // unit of the metric on the benchmark's line
	scale  float64 // the metric is multiplied by this for display (ns to ms: 1e-6)
	unit   string  // unit of the displayed value
	atMost bool    // the goal is an upper bound (else a lower bound)
	limit  float64 // the goal, in the displayed unit
}

var goals = []goal{
	{"store Get / SHA-256 over the same 4 MiB, by thread CPU", "BenchmarkGetVsSHA256/get", "get-x-sha256", 1, "x", false, 0.9},
	{"store Get / SHA-256 over the same 4 MiB, by wall time", "BenchmarkGetVsSHA256/get", "get-x-sha256-wall", 1, "x", false, 0.9},
	{"store View (lent buffer) / SHA-256 over the same 4 MiB, by thread CPU", "BenchmarkGetVsSHA256/view", "view-x-sha256", 1, "x", false, 0.9},
	{"store View (lent buffer) / SHA-256 over the same 4 MiB, by wall time", "BenchmarkGetVsSHA256/view", "view-x-sha256-wall", 1, "x", false, 0.9},
	{"audit of a 1,000-resource receipt beyond hashing, wall", "BenchmarkAudit1000", "beyond-hash-ns/op", 1e-6, "ms", true, 100},
	{"audit of a 1,000-resource receipt beyond hashing, process CPU", "BenchmarkAudit1000", "beyond-hash-cpu-ms/op", 1, "ms", true, 100},
	{"audit of a 1,000-resource receipt, allocations", "BenchmarkAudit1000", "allocs/op", 1, "allocs", true, 0},
	// The audits above run under the collector's floor that cmd/ql3 sets (internal/gcfloor);
	// beside them, the same audit under the runtime's default policy.
	{"the same audit under the runtime's default collector (GOGC=100), process CPU", "BenchmarkAudit1000DefaultGC", "beyond-hash-cpu-ms/op", 1, "ms", true, 0},
	{"ql3's own CPU per apply beyond two SHA-256 passes over kubectl (hashed in memory)", "BenchmarkApply/interleaved", "ql3-cpu-beyond-hash-ms", 1, "ms", true, 30},
	// The same, against two passes that also read kubectl from its file, as every pass must.
	{"ql3's own CPU per apply beyond two passes that read and hash kubectl", "BenchmarkApply/interleaved", "ql3-cpu-beyond-file-passes-ms", 1, "ms", true, 30},
	// Reported beside it, from the same iterations: the same apply into a store on a memory
	// filesystem, and what the disk's filesystem charged beyond that for the store's files and
	// fsyncs (docs/testbed.md, "What a file costs here").
	{"the same, its store on a memory filesystem (tmpfs)", "BenchmarkApply/interleaved", "ql3-cpu-beyond-file-passes-memfs-ms", 1, "ms", true, 0},
	{"what the store's disk filesystem charged an apply beyond tmpfs", "BenchmarkApply/interleaved", "store-fs-cpu-ms", 1, "ms", true, 0},
	// The references replay the kubectl calls the ceremony stored; how many is measured, not named.
	{"kubectl calls of an apply (the reference replays them)", "BenchmarkApply/kubectl-calls", "calls", 1, "calls", true, 0},
	{"apply / its kubectl calls, interleaved", "BenchmarkApply/interleaved", "ql3-x-calls", 1, "x", true, 1.05},
	// Reported beside it: the calls plus the one SHA-256 of kubectl no apply can start without.
	{"apply / (its kubectl calls + one SHA-256 of kubectl), interleaved", "BenchmarkApply/interleaved", "ql3-x-floor", 1, "x", true, 0},
	{"kubectl calls of a live audit (the reference replays them)", "BenchmarkLiveAudit", "calls", 1, "calls", true, 0},
	{"live audit / (its kubectl calls + one SHA-256 of kubectl)", "BenchmarkLiveAudit", "ql3-x-floor", 1, "x", true, 1.10},
	{"live audit / its kubectl calls", "BenchmarkLiveAudit", "ql3-x-calls", 1, "x", true, 0},
	// The deployment log's costs (store/logbench_test.go; the goals are issue 18's, docs/log.md).
	// The publication rows are measured in the same iterations, alternating, into a store
	// without a log (the reference) and one with a log.
	{"publication (PutIndex) without a log, median", "BenchmarkPublishLog", "nolog-median-µs", 1e-3, "ms", true, 0},
	{"publication (PutIndex) with the log append, median", "BenchmarkPublishLog", "log-median-µs", 1e-3, "ms", true, 0},
	{"what the log append adds to a publication, median of the differences", "BenchmarkPublishLog", "added-median-µs", 1e-3, "ms", true, 1},
	{"what the log append adds to a publication, process CPU, mean", "BenchmarkPublishLog", "added-cpu-µs", 1e-3, "ms", true, 0},
	{"log verify of 100,000 leaves, wall", "BenchmarkLogVerify100k", "ns/op", 1e-9, "s", true, 2},
	{"log verify of 100,000 leaves, process CPU (every core)", "BenchmarkLogVerify100k", "cpu-s/op", 1, "s", true, 0},
	{"proof write (store.LogProof), recent leaf of 100,000, wall", "BenchmarkLogProof/recent", "write-ms", 1, "ms", true, 1},
	{"proof write (store.LogProof), recent leaf of 100,000, process CPU", "BenchmarkLogProof/recent", "write-cpu-ms", 1, "ms", true, 0},
	{"proof check (parse, signature, inclusion), wall", "BenchmarkLogProof/recent", "check-ms", 1, "ms", true, 1},
	{"proof check (parse, signature, inclusion), process CPU", "BenchmarkLogProof/recent", "check-cpu-ms", 1, "ms", true, 0},
	// Both proofs find their leaf through the record's lookup (log/records): O(1) whatever its age.
	{"proof write (store.LogProof), oldest leaf of 100,000, wall", "BenchmarkLogProof/oldest", "write-ms", 1, "ms", true, 1},
	{"proof write (store.LogProof), oldest leaf of 100,000, process CPU", "BenchmarkLogProof/oldest", "write-cpu-ms", 1, "ms", true, 0},
	{"proof check alone (a 1,000-leaf log's proof)", "BenchmarkProofCheck", "ns/op", 1e-6, "ms", true, 0},
	// history of 10,000 publications from the log (history/bench_test.go): the log verified
	// without a key, with the log key, and under a witness policy. The goal ("≤ 200 ms") is a
	// time, judged by wall time as log verify's is (the honest reading on a quiet run); the
	// process CPU beside it is reported: on a loaded machine it says how much is work.
	{"history of 10,000 publications from the log, no key, wall", "BenchmarkHistory10k/nokey", "ns/op", 1e-6, "ms", true, 200},
	{"history of 10,000 publications from the log, no key, process CPU", "BenchmarkHistory10k/nokey", "cpu-ms/op", 1, "ms", true, 0},
	{"history of 10,000 publications from the log, --log-key, wall", "BenchmarkHistory10k/logkey", "ns/op", 1e-6, "ms", true, 200},
	{"history of 10,000 publications from the log, --log-key, process CPU", "BenchmarkHistory10k/logkey", "cpu-ms/op", 1, "ms", true, 0},
	{"history of 10,000 publications from the log, --policy, wall", "BenchmarkHistory10k/policy", "ns/op", 1e-6, "ms", true, 200},
	{"history of 10,000 publications from the log, --policy, process CPU", "BenchmarkHistory10k/policy", "cpu-ms/op", 1, "ms", true, 0},
}

// differences are rows computed run by run from two rows' benchmarks: what b adds to a.
var differences = []struct {
	figure, unit string
	a, b         string // benchmark names
	metric       string
	scale        float64
}{}

// result is one benchmark line: its package, name and metrics by unit.
type result struct {
	pkg, name string
	metrics   map[string]float64
	order     []string
}

// parse reads benchmark lines; a line is "BenchmarkName-N  iterations  value unit  value unit ...".
func parse(r io.Reader) ([]result, error) {
	var out []result
	pkg := ""
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = strings.TrimSpace(p)
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || len(f)%2 != 0 {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue
		}
		name := f[0]
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i]
			}
		}
		res := result{pkg: pkg, name: name, metrics: map[string]float64{}}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("benchreport: %q: %w", line, err)
			}
			res.metrics[f[i+1]] = v
			res.order = append(res.order, f[i+1])
		}
		out = append(out, res)
	}
	return out, sc.Err()
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func format(v float64) string {
	switch {
	case v >= 1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 3, 64)
	}
}

// report writes the table; it returns how many goals were measured and how many of those the
// median meets.
func report(w io.Writer, results []result) (measured, met int) {
	fmt.Fprintln(w, "| figure | goal | runs | median | met |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, g := range goals {
		var vals []float64
		for _, r := range results {
			if v, ok := r.metrics[g.metric]; ok && r.name == g.bench {
				vals = append(vals, v*g.scale)
			}
		}
		goalText, verdict := "(reported)", ""
		if g.limit != 0 {
			op := ">="
			if g.atMost {
				op = "<="
			}
			goalText = fmt.Sprintf("%s %s %s", op, format(g.limit), g.unit)
		}
		if len(vals) == 0 {
			fmt.Fprintf(w, "| %s | %s | not measured (%s) | | |\n", g.figure, goalText, g.bench)
			continue
		}
		strs := make([]string, len(vals))
		every := true
		ok := func(v float64) bool { return g.atMost && v <= g.limit || !g.atMost && v >= g.limit }
		for i, v := range vals {
			strs[i] = format(v)
			every = every && ok(v)
		}
		m := median(vals)
		if g.limit != 0 {
			measured++
			switch {
			case every:
				verdict, met = "yes, every run", met+1
			case ok(m):
				verdict, met = "median only", met+1
			default:
				verdict = "NO"
			}
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s %s | %s |\n", g.figure, goalText, strings.Join(strs, ", "), format(m), g.unit, verdict)
	}
	for _, d := range differences {
		var as, bs []float64
		for _, r := range results {
			if v, ok := r.metrics[d.metric]; ok {
				switch r.name {
				case d.a:
					as = append(as, v*d.scale)
				case d.b:
					bs = append(bs, v*d.scale)
				}
			}
		}
		n := min(len(as), len(bs))
		if n == 0 {
			fmt.Fprintf(w, "| %s | (reported) | not measured (%s, %s) | | |\n", d.figure, d.a, d.b)
			continue
		}
		vals := make([]float64, n)
		strs := make([]string, n)
		for i := range n {
			vals[i] = bs[i] - as[i]
			strs[i] = format(vals[i])
		}
		fmt.Fprintf(w, "| %s | (reported) | %s | %s %s |  |\n", d.figure, strings.Join(strs, ", "), format(median(vals)), d.unit)
	}
	var logRows []string
	for _, r := range results {
		if !strings.Contains(r.pkg+"/", "/deploylog/") {
			continue
		}
		var ms []string
		for _, u := range r.order {
			ms = append(ms, format(r.metrics[u])+" "+u)
		}
		logRows = append(logRows, fmt.Sprintf("| %s | %s |", r.name, strings.Join(ms, ", ")))
	}
	if len(logRows) > 0 {
		fmt.Fprintln(w, "\nThe deployment log's costs (no goal; every run):")
		fmt.Fprintln(w, "\n| benchmark | measured |")
		fmt.Fprintln(w, "|---|---|")
		for _, r := range logRows {
			fmt.Fprintln(w, r)
		}
	}
	fmt.Fprintf(w, "\n%d of %d goals met by the median\n", met, measured)
	return measured, met
}

func main() {
	results, err := parse(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	report(os.Stdout, results)
}
