package store

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"

	"github.com/qinglong/ql3/evidence"
)

// afterTests are cleanups of state shared by several tests or benchmarks (a benchmark's large
// fixture), run by TestMain once they all ended.
var afterTests []func()

// TestMain lets the test binary act as a child process: QL3_STORE_CHILD selects a role and
// QL3_STORE_ROOT the store it works on.
func TestMain(m *testing.M) {
	switch os.Getenv("QL3_STORE_CHILD") {
	case "":
		code := m.Run()
		for _, f := range afterTests {
			f()
		}
		os.Exit(code)
	case "put":
		os.Exit(childPut(os.Getenv("QL3_STORE_ROOT")))
	case "crash":
		s, err := Open(os.Getenv("QL3_STORE_ROOT"))
		if err != nil {
			os.Exit(3)
		}
		// Die with the staging file written but not yet renamed into place.
		commitHook = func() { syscall.Kill(os.Getpid(), syscall.SIGKILL) }
		s.PutBlob(evidence.MediaTypeOctets, crashData())
		os.Exit(4)
	case "crash-batch":
		s, err := Open(os.Getenv("QL3_STORE_ROOT"))
		if err != nil {
			os.Exit(3)
		}
		at, _ := strconv.Atoi(os.Getenv("QL3_STORE_KILL_AT"))
		batchHook = func(renamed int) {
			if renamed == at {
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
			}
		}
		putBatch(s, batchData())
		os.Exit(4)
	case "crash-attested":
		s, err := Open(os.Getenv("QL3_STORE_ROOT"))
		if err != nil {
			os.Exit(3)
		}
		at := os.Getenv("QL3_STORE_KILL_AT")
		kill := func() { syscall.Kill(os.Getpid(), syscall.SIGKILL) }
		if at == "entry" {
			// The first commit hook runs before the objects are renamed, the second before the
			// entry is.
			calls := 0
			commitHook = func() {
				if calls++; calls == 2 {
					kill()
				}
			}
		} else {
			n, _ := strconv.Atoi(at)
			batchHook = func(renamed int) {
				if renamed == n {
					kill()
				}
			}
		}
		subject, statement, bundle := attestedData()
		s.PutAttested(subject, statement, bundle)
		os.Exit(4)
	case "crash-gc":
		os.Exit(childCrashGC(os.Getenv("QL3_STORE_ROOT"), os.Getenv("QL3_GC_KILL_AT")))
	case "crash-log":
		os.Exit(childCrashLog(os.Getenv("QL3_STORE_ROOT"), os.Getenv("QL3_LOG_KILL_AT")))
	case "crash-import":
		os.Exit(childCrashImport(os.Getenv("QL3_STORE_ROOT"), os.Getenv("QL3_IMPORT_SRC"), os.Getenv("QL3_LOG_KILL_AT")))
	case "batchcrash":
		s, err := Open(os.Getenv("QL3_STORE_ROOT"))
		if err != nil {
			os.Exit(3)
		}
		// Die with a batch's staging files synced but none renamed into place.
		b := s.NewBatch()
		for i := range 3 {
			if _, err := b.PutBlob(evidence.MediaTypeOctets, benchData(100+i)); err != nil {
				os.Exit(5)
			}
		}
		commitHook = func() { syscall.Kill(os.Getpid(), syscall.SIGKILL) }
		b.Sync()
		os.Exit(4)
	}
}

func crashData() []byte { return benchData(7) }

func childPut(root string) int {
	s, err := Open(root)
	if err != nil {
		return 3
	}
	defer s.Close()
	var wg sync.WaitGroup
	fail := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 40; i++ {
				if _, err := s.PutBlob(evidence.MediaTypeOctets, []byte(fmt.Sprintf("obj-%d-%d", i, g%2))); err != nil {
					fail <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(fail)
	if err := <-fail; err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 5
	}
	return 0
}

func child(t *testing.T, role, root string) *exec.Cmd {
	t.Helper()
	c := exec.Command(os.Args[0], "-test.run=^$")
	c.Env = append(os.Environ(), "QL3_STORE_CHILD="+role, "QL3_STORE_ROOT="+root)
	c.Stderr = os.Stderr
	return c
}

func TestConcurrentProcesses(t *testing.T) {
	s := newStore(t)
	a, b := child(t, "put", s.Root()), child(t, "put", s.Root())
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	if err := a.Wait(); err != nil {
		t.Fatalf("child a: %v", err)
	}
	if err := b.Wait(); err != nil {
		t.Fatalf("child b: %v", err)
	}
	r, err := s.Verify()
	if err != nil || !r.OK() || r.Objects != 80 {
		t.Fatalf("verify: %+v %v", r, err)
	}
}

func TestCrashMidPut(t *testing.T) {
	s := newStore(t)
	err := child(t, "crash", s.Root()).Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child did not die by SIGKILL: %v", err)
	}
	r, err := s.Verify()
	if err != nil || !r.OK() {
		t.Fatalf("verify after crash: %+v %v", r, err)
	}
	if len(r.Hints) != 1 || r.Hints[0].Code != CodeStagingLeftover {
		t.Fatalf("hints: %+v", r.Hints)
	}
	if _, err := s.PutBlob(evidence.MediaTypeOctets, crashData()); err != nil {
		t.Fatalf("put after crash: %v", err)
	}
}

// A run killed in the middle of a batch's Sync leaves no object of the batch in the store, only
// staging files that Verify reports as hints; the same objects can be put afterwards.
func TestCrashMidBatchSync(t *testing.T) {
	s := newStore(t)
	err := child(t, "batchcrash", s.Root()).Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child did not die by SIGKILL: %v", err)
	}
	r, err := s.Verify()
	if err != nil || !r.OK() || r.Objects != 0 {
		t.Fatalf("verify after crash: %+v %v", r, err)
	}
	if len(r.Hints) != 3 || r.Hints[0].Code != CodeStagingLeftover {
		t.Fatalf("hints: %+v", r.Hints)
	}
	for i := range 3 {
		if _, err := s.PutBlob(evidence.MediaTypeOctets, benchData(100+i)); err != nil {
			t.Fatalf("put after crash: %v", err)
		}
	}
}
