package main

import (
	"strings"
	"testing"
)

const sample = `goos: linux
pkg: github.com/qinglong/ql3/store
BenchmarkGetVsSHA256/get-2   	     200	  28613770 ns/op	 293.17 MB/s	      1106 get-MB/s	         0.9380 get-x-sha256	         0.5779 get-x-sha256-wall	      1498 sha256-MB/s
BenchmarkGetVsSHA256/get-2   	     200	  28613770 ns/op	 293.17 MB/s	      1106 get-MB/s	         0.8000 get-x-sha256	         0.9779 get-x-sha256-wall	      1498 sha256-MB/s
BenchmarkGetVsSHA256/get-2   	     200	  28613770 ns/op	 293.17 MB/s	      1106 get-MB/s	         0.9500 get-x-sha256	         0.5779 get-x-sha256-wall	      1498 sha256-MB/s
pkg: github.com/qinglong/ql3/audit
BenchmarkAudit1000-2   	      10	 136317489 ns/op	  10.60 MB/s	 90.5 beyond-hash-cpu-ms/op	 134895768 beyond-hash-ns/op	   1421721 hash-ns/op	67187036 B/op	  941045 allocs/op
BenchmarkLogVerify100k-2   	       3	2500000000 ns/op	         4.100 cpu-s/op
BenchmarkLogProof/recent-2 	    1000	    500000 ns/op	         0.4000 write-ms	         0.1000 check-ms	         0.3800 write-cpu-ms	         0.1000 check-cpu-ms
BenchmarkPublishLog-2   	     100	   9000000 ns/op	       800.0 added-median-µs	      4000 log-median-µs	      3200 nolog-median-µs
pkg: github.com/qinglong/ql3/history
BenchmarkHistory10k/nokey-2         	       5	 190000000 ns/op	       350.0 cpu-ms/op
BenchmarkHistory10k/logkey-2        	       5	 230000000 ns/op	       190.0 cpu-ms/op
pkg: github.com/qinglong/ql3/deploylog
BenchmarkLogAppend-2   	    1000	  12345 ns/op	 2 fsyncs/op
PASS
`

func TestReport(t *testing.T) {
	res, err := parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 10 || res[0].name != "BenchmarkGetVsSHA256/get" || res[3].metrics["beyond-hash-ns/op"] != 134895768 {
		t.Fatalf("parsed %+v", res)
	}
	var b strings.Builder
	measured, met := report(&b, res)
	out := b.String()
	for _, want := range []string{
		"| store Get / SHA-256 over the same 4 MiB, by thread CPU | >= 0.900 x | 0.938, 0.800, 0.950 | 0.938 x | median only |",
		"| store Get / SHA-256 over the same 4 MiB, by wall time | >= 0.900 x | 0.578, 0.978, 0.578 | 0.578 x | NO |",
		"| audit of a 1,000-resource receipt beyond hashing, wall | <= 100.0 ms | 134.9 | 134.9 ms | NO |",
		"| audit of a 1,000-resource receipt beyond hashing, process CPU | <= 100.0 ms | 90.5 | 90.5 ms | yes, every run |",
		"| apply / its kubectl calls, interleaved | <= 1.050 x | not measured (BenchmarkApply/interleaved) | | |",
		"| BenchmarkLogAppend | 12345 ns/op, 2.000 fsyncs/op |",
		"| log verify of 100,000 leaves, wall | <= 2.000 s | 2.500 | 2.500 s | NO |",
		"| log verify of 100,000 leaves, process CPU (every core) | (reported) | 4.100 | 4.100 s |  |",
		"| proof write (store.LogProof), recent leaf of 100,000, wall | <= 1.000 ms | 0.400 | 0.400 ms | yes, every run |",
		"| what the log append adds to a publication, median of the differences | <= 1.000 ms | 0.800 | 0.800 ms | yes, every run |",
		"| proof write (store.LogProof), oldest leaf of 100,000, wall | <= 1.000 ms | not measured (BenchmarkLogProof/oldest) | | |",
		// history's goal is judged by wall time; its CPU is reported beside it.
		"| history of 10,000 publications from the log, no key, wall | <= 200.0 ms | 190.0 | 190.0 ms | yes, every run |",
		"| history of 10,000 publications from the log, no key, process CPU | (reported) | 350.0 | 350.0 ms |  |",
		"| history of 10,000 publications from the log, --log-key, wall | <= 200.0 ms | 230.0 | 230.0 ms | NO |",
		"| history of 10,000 publications from the log, --log-key, process CPU | (reported) | 190.0 | 190.0 ms |  |",
		"| history of 10,000 publications from the log, --policy, wall | <= 200.0 ms | not measured (BenchmarkHistory10k/policy) | | |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if measured != 10 || met != 6 {
		t.Errorf("measured %d met %d\n%s", measured, met, out)
	}
}
