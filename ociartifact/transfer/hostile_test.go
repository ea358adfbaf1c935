package transfer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/testbed/ocitest"
	"github.com/qinglong/ql3/ociartifact"
	"github.com/qinglong/ql3/ociartifact/transfer"
	"github.com/qinglong/ql3/refuse"
)

// hostile serves the 1,000-resource receipt's artifact (tag "base") from a hostile registry and
// returns it with the collected artifact. No credentials: it asks for none.
func hostile(t *testing.T) (*ocitest.Hostile, *ociartifact.Collected) {
	t.Helper()
	src, rc := ocitest.Receipt1000(t)
	c, err := ociartifact.Collect(src, rc.Digest, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := ocitest.StartHostile(t)
	for _, b := range c.Blobs {
		h.PutBlob(b)
	}
	h.PutBlob(ociartifact.EmptyConfig.Data)
	h.PutManifest("base", c.Manifest)
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	return h, c
}

// pullWithin pulls ref into a fresh store, fails the test if that takes longer than limit, and
// checks that a refused pull wrote nothing. It returns the time taken and the error.
func pullWithin(t *testing.T, ctx context.Context, ref string, o transfer.Options, limit time.Duration) (time.Duration, error) {
	t.Helper()
	dst := freshStore(t)
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		_, _, err := transfer.Pull(ctx, ref, dst, o)
		done <- err
	}()
	select {
	case err := <-done:
		took := time.Since(start)
		if err != nil {
			if fs := files(t, dst); len(fs) != 0 {
				t.Fatalf("a refused pull wrote %v", fs)
			}
		}
		return took, err
	case <-time.After(limit):
		t.Fatalf("the pull did not end within %s", limit)
	}
	return 0, nil
}

// stall blocks a handler until its client goes away.
func stall(w http.ResponseWriter, r *http.Request) {
	<-r.Context().Done()
}

func TestHostileStalls(t *testing.T) {
	h, c := hostile(t)
	ref := h.Host + "/ql3/evidence:base"
	bound := 300 * time.Millisecond
	layer := c.Closure[len(c.Closure)-1]
	isLayer := func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, "/blobs/"+string(layer.Digest)) }
	vectors := []struct {
		name string
		hook func(w http.ResponseWriter, r *http.Request) bool
		o    transfer.Options
	}{
		{"no response headers", func(w http.ResponseWriter, r *http.Request) bool {
			if strings.Contains(r.URL.Path, "/manifests/") {
				stall(w, r)
				return true
			}
			return false
		}, transfer.Options{ResponseTimeout: bound}},
		{"a body that stops", func(w http.ResponseWriter, r *http.Request) bool {
			if !isLayer(r) {
				return false
			}
			b := c.Blobs[layer.Digest]
			w.Header().Set("Content-Length", strconv.Itoa(len(b)))
			w.WriteHeader(http.StatusOK)
			w.Write(b[:len(b)/2])
			w.(http.Flusher).Flush()
			stall(w, r)
			return true
		}, transfer.Options{IdleTimeout: bound}},
		{"a body that trickles", func(w http.ResponseWriter, r *http.Request) bool {
			if !isLayer(r) {
				return false
			}
			b := c.Blobs[layer.Digest]
			w.Header().Set("Content-Length", strconv.Itoa(len(b)))
			w.WriteHeader(http.StatusOK)
			for i := range b {
				if _, err := w.Write(b[i : i+1]); err != nil {
					return true
				}
				w.(http.Flusher).Flush()
				select {
				case <-time.After(bound / 3):
				case <-r.Context().Done():
					return true
				}
			}
			return true
		}, transfer.Options{IdleTimeout: bound, Timeout: 3 * bound}},
	}
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			h.SetHook(v.hook)
			v.o.CAFile = h.CAFile
			took, err := pullWithin(t, context.Background(), ref, v.o, 10*time.Second)
			if code(err) != transfer.CodeTimeout {
				t.Fatalf("got %v, want %s", err, transfer.CodeTimeout)
			}
			t.Logf("refused after %s: %v", took, err)
		})
	}
	t.Run("cancelled while a read is blocked", func(t *testing.T) {
		h.SetHook(vectors[1].hook)
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(bound, cancel)
		took, err := pullWithin(t, ctx, ref, transfer.Options{CAFile: h.CAFile}, 5*time.Second)
		if code(err) != transfer.CodeInterrupted {
			t.Fatalf("got %v, want %s", err, transfer.CodeInterrupted)
		}
		t.Logf("ended %s after the start, %s after the cancellation", took, took-bound)
	})
}

func TestHostileRedirects(t *testing.T) {
	h, c := hostile(t)
	ref := h.Host + "/ql3/evidence:base"
	layer := c.Closure[len(c.Closure)-1]
	_, port, _ := strings.Cut(h.Host, ":")
	for _, v := range []struct {
		name, to string
		code     refuse.Code
	}{
		{"to plain HTTP on the same host", "http://" + h.Host, transfer.CodeRedirect},
		{"to another host", "https://localhost:" + port, transfer.CodeRedirect},
		{"within the registry", "https://" + h.Host, ""},
	} {
		t.Run(v.name, func(t *testing.T) {
			h.SetHook(func(w http.ResponseWriter, r *http.Request) bool {
				if !strings.HasSuffix(r.URL.Path, "/blobs/"+string(layer.Digest)) || r.URL.Query().Get("moved") != "" {
					return false
				}
				http.Redirect(w, r, v.to+r.URL.Path+"?moved=1", http.StatusTemporaryRedirect)
				return true
			})
			_, err := pullWithin(t, context.Background(), ref, transfer.Options{CAFile: h.CAFile}, 10*time.Second)
			if code(err) != v.code {
				t.Fatalf("got %v, want %q", err, v.code)
			}
		})
	}
}

func TestHostileBodyLongerThanDescriptor(t *testing.T) {
	h, c := hostile(t)
	layer := c.Closure[len(c.Closure)-1]
	h.SetHook(func(w http.ResponseWriter, r *http.Request) bool {
		if !strings.HasSuffix(r.URL.Path, "/blobs/"+string(layer.Digest)) {
			return false
		}
		w.Write(append(append([]byte{}, c.Blobs[layer.Digest]...), make([]byte, 1<<20)...))
		return true
	})
	_, err := pullWithin(t, context.Background(), h.Host+"/ql3/evidence:base", transfer.Options{CAFile: h.CAFile}, 10*time.Second)
	t.Log(err)
	if got := code(err); got != ociartifact.CodeBlobDigest {
		t.Fatalf("got %v, want %s", err, ociartifact.CodeBlobDigest)
	}
}

// TestHostileManyLayers: a 60,000-layer manifest is refused before any layer is fetched, and a
// manifest that lists 5,000 objects after the closure costs the closure's fetches and at most a
// window more, never one per layer.
func TestHostileManyLayers(t *testing.T) {
	h, c := hostile(t)
	withExtra := func(n int) []byte {
		var m ocispec.Manifest
		if err := json.Unmarshal(c.Manifest, &m); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			d := digest.FromString(fmt.Sprint("extra ", i))
			m.Layers = append(m.Layers, ocispec.Descriptor{MediaType: evidence.MediaTypeOctets, Digest: d, Size: 1,
				Annotations: map[string]string{ocispec.AnnotationTitle: d.Encoded()}})
		}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, v := range []struct {
		name     string
		extra    int
		code     refuse.Code
		maxFetch int64
	}{
		{"60,000 layers", 60000 - len(c.Closure), ociartifact.CodeTooLarge, 0},
		{"5,000 layers after the closure", 5000, ociartifact.CodeNotClosure, int64(len(c.Closure)) + 16},
	} {
		t.Run(v.name, func(t *testing.T) {
			mb := withExtra(v.extra)
			if len(mb) > ociartifact.MaxManifestBytes {
				t.Fatalf("manifest of %d bytes: the test would prove the size bound, not the layer bound", len(mb))
			}
			tag := strings.NewReplacer(",", "", " ", "-").Replace(v.name)
			h.PutManifest(tag, mb)
			h.BlobGets.Store(0)
			took, err := pullWithin(t, context.Background(), h.Host+"/ql3/evidence:"+tag, transfer.Options{CAFile: h.CAFile}, 30*time.Second)
			if code(err) != v.code {
				t.Fatalf("got %v, want %s", err, v.code)
			}
			if n := h.BlobGets.Load(); n > v.maxFetch {
				t.Fatalf("%d blob fetches, want at most %d", n, v.maxFetch)
			}
			t.Logf("%d blob fetches, refused after %s", h.BlobGets.Load(), took)
		})
	}
}
