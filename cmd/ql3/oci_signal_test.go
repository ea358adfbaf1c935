package main

import (
	"bytes"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/qinglong/ql3/internal/testbed/ocitest"
)

// TestHostileStalledPullEndsOnSignal: `ql3 store pull` from a registry that answers the manifest's
// headers and then sends nothing ends promptly on SIGTERM (and on SIGINT) while its read is
// blocked, with OCI_INTERRUPTED and exit 1, and removes the store it created. Default bounds: the
// idle bound (30 s) is not what ends it.
func TestHostileStalledPullEndsOnSignal(t *testing.T) {
	h := ocitest.StartHostile(t)
	h.SetHook(func(w http.ResponseWriter, r *http.Request) bool {
		if !strings.Contains(r.URL.Path, "/manifests/") {
			return false
		}
		w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
		w.Header().Set("Content-Length", "1000")
		w.WriteHeader(http.StatusOK)
		w.Write([]byte(`{"schemaVersion":`))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		return true
	})
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			st := filepath.Join(t.TempDir(), "pulled")
			cmd := exec.Command(ql3Binary(t), "store", "pull", "--ca-file", h.CAFile, "--store", st, h.Host+"/ql3/evidence:stalled")
			cmd.Env = append(os.Environ(), "QL3_STORE=", "DOCKER_CONFIG="+t.TempDir())
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// Wait until the pull is blocked in its read: the store exists once the pull runs.
			for i := 0; ; i++ {
				if _, err := os.Stat(st); err == nil {
					break
				}
				if i == 200 {
					cmd.Process.Kill()
					t.Fatal("the pull never started")
				}
				time.Sleep(25 * time.Millisecond)
			}
			time.Sleep(300 * time.Millisecond)
			sent := time.Now()
			cmd.Process.Signal(sig)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("the pull ignored %s for 10 s", sig)
			}
			took := time.Since(sent)
			if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(stderr.String(), "OCI_INTERRUPTED") {
				t.Fatalf("exit %d, stderr %s", code, stderr.String())
			}
			if _, err := os.Stat(st); !os.IsNotExist(err) {
				t.Fatalf("the interrupted pull left its store: %v", err)
			}
			t.Logf("%s: ended %s after the signal", sig, took)
		})
	}
}
