package ocitest

import (
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Hostile is a TLS server on 127.0.0.1 that plays a registry for what a real registry cannot be
// made to do: stall or trickle a response, redirect, serve a body longer than its descriptor, a
// 60,000-layer manifest, a foreign attachment. It serves the distribution API's reads (no auth):
// GET /v2/, manifests by tag or digest, blobs by digest, and 404 for anything else (so the
// referrers API and the referrers tag are absent). A hook set with SetHook sees every request first
// and answers it instead when it returns true. Tests that use it carry "Hostile" in their names.
type Hostile struct {
	Host   string // 127.0.0.1:port
	CAFile string // the server's self-signed certificate, as a CA bundle
	URL    string // https://Host

	mu        sync.Mutex
	manifests map[string][]byte // by tag and by digest
	blobs     map[digest.Digest][]byte
	hook      func(w http.ResponseWriter, r *http.Request) bool
	// BlobGets counts the blob requests served (hooked or not).
	BlobGets atomic.Int64
	srv      *httptest.Server
}

// StartHostile starts the server; it is closed when the test ends.
func StartHostile(t testing.TB) *Hostile {
	t.Helper()
	h := &Hostile{manifests: map[string][]byte{}, blobs: map[digest.Digest][]byte{}}
	h.srv = httptest.NewUnstartedServer(http.HandlerFunc(h.serve))
	h.srv.StartTLS()
	// Close the connections first: a handler that stalls ends when its request's context does.
	t.Cleanup(func() { h.srv.CloseClientConnections(); h.srv.Close() })
	h.URL = h.srv.URL
	h.Host = strings.TrimPrefix(h.srv.URL, "https://")
	h.CAFile = filepath.Join(t.TempDir(), "hostile-ca.pem")
	cert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: h.srv.Certificate().Raw})
	if err := os.WriteFile(h.CAFile, cert, 0o600); err != nil {
		t.Fatal(err)
	}
	return h
}

// SetHook makes f see every request first (nil: none). The server's handlers read it under the
// lock: a client in another process (ql3 run by a test) gives the race detector no other order
// between the test's set and a handler's read.
func (h *Hostile) SetHook(f func(w http.ResponseWriter, r *http.Request) bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hook = f
}

// PutManifest serves mb under tag and under its digest, and returns the digest.
func (h *Hostile) PutManifest(tag string, mb []byte) digest.Digest {
	d := digest.FromBytes(mb)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.manifests[tag], h.manifests[string(d)] = mb, mb
	return d
}

// PutBlob serves b under its digest.
func (h *Hostile) PutBlob(b []byte) digest.Digest {
	d := digest.FromBytes(b)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.blobs[d] = b
	return d
}

func (h *Hostile) serve(w http.ResponseWriter, r *http.Request) {
	if strings.Contains(r.URL.Path, "/blobs/") {
		h.BlobGets.Add(1)
	}
	h.mu.Lock()
	hook := h.hook
	h.mu.Unlock()
	if hook != nil && hook(w, r) {
		return
	}
	if r.URL.Path == "/v2/" {
		w.WriteHeader(http.StatusOK)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if i := strings.LastIndex(r.URL.Path, "/manifests/"); i >= 0 {
		mb, ok := h.manifests[r.URL.Path[i+len("/manifests/"):]]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", ocispec.MediaTypeImageManifest)
		w.Header().Set("Docker-Content-Digest", string(digest.FromBytes(mb)))
		w.Header().Set("Content-Length", strconv.Itoa(len(mb)))
		if r.Method != http.MethodHead {
			w.Write(mb)
		}
		return
	}
	if i := strings.LastIndex(r.URL.Path, "/blobs/"); i >= 0 {
		b, ok := h.blobs[digest.Digest(r.URL.Path[i+len("/blobs/"):])]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		if r.Method != http.MethodHead {
			w.Write(b)
		}
		return
	}
	http.NotFound(w, r)
}

// String names the server for a failure message.
func (h *Hostile) String() string { return fmt.Sprintf("hostile registry %s", h.Host) }
