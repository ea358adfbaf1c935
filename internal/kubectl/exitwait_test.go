package kubectl

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// exitChildEnv, set in a re-executed test binary, makes TestMain run exitChild: sleep for the
// given milliseconds, then exit with status 7.
const exitChildEnv = "QL3_KUBECTL_EXIT_CHILD"

func exitChild() {
	ms, _ := strconv.Atoi(os.Getenv(exitChildEnv))
	time.Sleep(time.Duration(ms) * time.Millisecond)
	os.Exit(7)
}

// startExitChild starts the test binary as exitChild, exiting after ms milliseconds.
func startExitChild(t *testing.T, ms int) *os.Process {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p, err := os.StartProcess(self, []string{self}, &os.ProcAttr{
		Env:   append(os.Environ(), exitChildEnv+"="+strconv.Itoa(ms)),
		Files: []*os.File{nil, os.Stderr, os.Stderr},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Kill(); _, _ = p.Wait() })
	return p
}

// TestExitWaiter: waitExit returns once the child has exited, and leaves it unreaped, on the
// pidfd path and on waitExited's, for a child that exits by itself, one that is killed while
// waited for, and one that had exited before the wait began; and the pidfd is closed after.
func TestExitWaiter(t *testing.T) {
	for _, path := range []string{"pidfd", "waitid"} {
		t.Run(path, func(t *testing.T) {
			opened := 0
			open := pidfdOpen
			t.Cleanup(func() { pidfdOpen = open })
			pidfdOpen = func(pid int, flags int) (int, error) {
				if path == "waitid" {
					return -1, unix.ENOSYS
				}
				opened++
				return open(pid, flags)
			}
			for _, c := range []struct {
				name   string
				ms     int  // the child's life
				kill   bool // killed while waited for
				exited bool // waited for only once it has exited
			}{
				{"exits", 200, false, false},
				{"killed", 60_000, true, false},
				{"already-exited", 0, false, true},
			} {
				t.Run(c.name, func(t *testing.T) {
					before := openDescriptors(t)
					p := startExitChild(t, c.ms)
					if c.exited {
						if err := waitExited(p.Pid); err != nil {
							t.Fatal(err)
						}
					}
					done := make(chan error, 1)
					go func() { done <- waitExit(p.Pid) }()
					if c.kill {
						// What the pidfd is for: no thread sits in waitid while the child runs.
						// waitid's path shows one within 10 s; the pidfd's must show none for
						// 300 ms, long enough for its goroutine to have reached any waitid.
						seen, watch := 0, 10*time.Second
						if path == "pidfd" {
							watch = 300 * time.Millisecond
						}
						for end := time.Now().Add(watch); time.Now().Before(end) && seen == 0; {
							time.Sleep(5 * time.Millisecond)
							seen = threadsInWaitid(t)
						}
						if want := map[string]int{"pidfd": 0, "waitid": 1}[path]; seen != want {
							t.Errorf("%d threads seen blocked in waitid during the wait, want %d", seen, want)
						}
						if err := p.Signal(syscall.SIGKILL); err != nil {
							t.Fatal(err)
						}
					}
					select {
					case err := <-done:
						if err != nil {
							t.Fatalf("wait: %v", err)
						}
					case <-time.After(30 * time.Second):
						t.Fatal("the wait did not return after the child exited")
					}
					// Not reaped by the wait: the status is still there to collect.
					st, err := p.Wait()
					if err != nil {
						t.Fatalf("reap after the wait: %v", err)
					}
					ws := st.Sys().(syscall.WaitStatus)
					switch {
					case c.kill && (!ws.Signaled() || ws.Signal() != syscall.SIGKILL):
						t.Errorf("status %v, want killed by SIGKILL", ws)
					case !c.kill && ws.ExitStatus() != 7:
						t.Errorf("status %v, want exit 7", ws)
					}
					if after := openDescriptors(t); after != before {
						t.Errorf("%d descriptors open after the wait, %d before", after, before)
					}
				})
			}
			if path == "pidfd" && opened != 3 {
				t.Errorf("%d pidfds opened for 3 waits", opened)
			}
		})
	}
}

func openDescriptors(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// threadsInWaitid counts this process's threads blocked in waitid(2), by /proc/self/task/*/syscall
// (its first field is the number of the system call a blocked thread is in).
func threadsInWaitid(t *testing.T) int {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + task.Name() + "/syscall")
		if err != nil {
			continue // the thread is gone
		}
		if f := strings.Fields(string(b)); len(f) > 0 && f[0] == strconv.Itoa(unix.SYS_WAITID) {
			n++
		}
	}
	return n
}
