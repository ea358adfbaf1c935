package transfer

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/qinglong/ql3/refuse"
)

// idleTransport bounds every read of a response body: each request gets a context of its own,
// cancelled when one read of the body makes no progress for idle. Cancelling the request's
// context is what unblocks a read that the peer never completes (net/http aborts the
// connection), so a registry that sends headers and then trickles or stops costs at most idle
// per read, and the caller's cancellation (a signal) reaches a blocked read the same way.
type idleTransport struct {
	next http.RoundTripper
	idle time.Duration
}

func (t *idleTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(req.Context())
	resp, err := t.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel(nil)
		return nil, err
	}
	b := &idleBody{rc: resp.Body, ctx: ctx, cancel: cancel, idle: t.idle, url: req.URL.Redacted()}
	b.timer = time.AfterFunc(t.idle, b.expire)
	b.timer.Stop() // armed only while a read waits
	resp.Body = b
	return resp, nil
}

// errIdle is the cause of a request cancelled by its idle bound.
var errIdle = errors.New("transfer: idle read bound")

type idleBody struct {
	rc     io.ReadCloser
	ctx    context.Context
	cancel context.CancelCauseFunc
	idle   time.Duration
	url    string
	timer  *time.Timer
	mu     sync.Mutex
	closed bool
}

func (b *idleBody) expire() { b.cancel(errIdle) }

func (b *idleBody) Read(p []byte) (int, error) {
	b.timer.Reset(b.idle)
	n, err := b.rc.Read(p)
	b.timer.Stop()
	if err != nil && err != io.EOF && errors.Is(context.Cause(b.ctx), errIdle) {
		return n, refuse.Wrap(CodeTimeout, err, "the registry sent nothing for %s while %s was read (--idle-timeout)", b.idle, b.url)
	}
	return n, err
}

func (b *idleBody) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	b.timer.Stop()
	err := b.rc.Close()
	b.cancel(nil)
	return err
}

// checkRedirect refuses a redirect that leaves TLS or the registry's host. Blob bytes are
// re-hashed whatever their origin, but docs/oci.md promises TLS to the registry named, and a
// redirect is where a registry could send the client elsewhere. Plain HTTP to a loopback
// registry (PlainHTTP, checked before any connection) keeps its scheme.
func checkRedirect(registryHost string, plainHTTP bool) func(*http.Request, []*http.Request) error {
	scheme := "https"
	if plainHTTP {
		scheme = "http"
	}
	return func(req *http.Request, via []*http.Request) error {
		if len(via) >= 10 {
			return refuse.New(CodeRedirect, "the registry redirected %d times", len(via))
		}
		if req.URL.Scheme != scheme || req.URL.Host != registryHost {
			return refuse.New(CodeRedirect, "the registry redirected %s to %s://%s: a redirect may not leave %s://%s",
				via[len(via)-1].URL.Path, req.URL.Scheme, req.URL.Host, scheme, registryHost)
		}
		return nil
	}
}

// finish turns a failure of a bounded transfer into the refusal of its cause: the overall
// deadline (OCI_TIMEOUT) or the caller's cancellation (OCI_INTERRUPTED), whatever error the
// client library returned on the way out.
func finish(ctx, parent context.Context, err error) error {
	if err == nil {
		return nil
	}
	if parent.Err() != nil {
		return refuse.Wrap(CodeInterrupted, err, "the transfer was interrupted")
	}
	if ctx.Err() != nil {
		if c, ok := refuse.As(context.Cause(ctx)); ok {
			return c
		}
		return refuse.Wrap(CodeTimeout, err, "the transfer passed its overall deadline")
	}
	return err
}
