// Package transfer pushes ql3 evidence artifacts (package ociartifact) to an OCI registry and
// pulls them into a private ql3 store. Credentials come only from the standard Docker
// configuration and its credential helpers ($DOCKER_CONFIG/config.json or
// ~/.docker/config.json), never from an argument; they are handed to the HTTP client and reach
// no record, output or error. TLS is verified against the system roots (SSL_CERT_FILE and
// SSL_CERT_DIR are honoured) plus an optional CA bundle; plain HTTP is allowed only when asked
// for and only to a literal loopback address.
package transfer

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"time"

	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/errcode"

	"github.com/qinglong/ql3/internal/input"
	"github.com/qinglong/ql3/refuse"
)

// Reason codes raised by this package (ociartifact's codes cover the artifact itself).
const (
	// CodeReference: the reference is not host[:port]/repository[:tag|@digest] or lacks what
	// the operation needs.
	CodeReference refuse.Code = "OCI_REFERENCE"
	// CodePlainHTTP: plain HTTP was asked for a registry that is not a literal loopback address.
	CodePlainHTTP refuse.Code = "OCI_PLAIN_HTTP"
	// CodeTLS: the registry's certificate did not verify (unknown authority, wrong name, expired),
	// or the CA bundle option could not be read.
	CodeTLS refuse.Code = "OCI_TLS"
	// CodeAuth: the registry refused the credentials (401/403), or there were none it accepts.
	CodeAuth refuse.Code = "OCI_AUTH"
	// CodeCredentials: the Docker configuration or a credential helper could not be read.
	CodeCredentials refuse.Code = "OCI_CREDENTIALS"
	// CodeNotFound: the registry has no manifest or blob of that name.
	CodeNotFound refuse.Code = "OCI_NOT_FOUND"
	// CodeRegistry: any other failure talking to the registry (connection, status, protocol).
	CodeRegistry refuse.Code = "OCI_REGISTRY"
	// CodeTimeout: a network wait passed its bound: the response headers (ResponseTimeout), a
	// read of a body that trickles or stops (IdleTimeout), or the whole transfer (Timeout).
	CodeTimeout refuse.Code = "OCI_TIMEOUT"
	// CodeInterrupted: the caller's context was cancelled (SIGINT or SIGTERM in ql3) while the
	// transfer waited on the network.
	CodeInterrupted refuse.Code = "OCI_INTERRUPTED"
	// CodeRedirect: the registry redirected a request off TLS or to another host.
	CodeRedirect refuse.Code = "OCI_REDIRECT"
)

// Defaults of the network bounds (docs/oci.md). A registry that answers at all answers headers
// within seconds, and a body read that makes no progress for 30 s is stalled.
const (
	DefaultResponseTimeout = 30 * time.Second
	DefaultIdleTimeout     = 30 * time.Second
	DefaultTimeout         = 10 * time.Minute
	// maxCAFile bounds the --ca-file PEM bundle (the system bundle of a distribution is ~200 KiB).
	maxCAFile = 4 << 20
)

// Options configure the registry client. There is deliberately no credential field.
type Options struct {
	// PlainHTTP talks HTTP instead of HTTPS; refused unless the registry is a literal loopback
	// IP address (127.0.0.0/8, ::1).
	PlainHTTP bool
	// CAFile is a PEM bundle trusted in addition to the system roots.
	CAFile string
	// Concurrency bounds parallel blob transfers (default 4).
	Concurrency int
	// ResponseTimeout bounds each wait for a response's headers, and each dial and TLS handshake
	// (default DefaultResponseTimeout).
	ResponseTimeout time.Duration
	// IdleTimeout bounds each read of a response body: a body that sends nothing for this long
	// is abandoned (default DefaultIdleTimeout).
	IdleTimeout time.Duration
	// Timeout bounds the whole push or pull (default DefaultTimeout).
	Timeout time.Duration
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// bounded is ctx with the transfer's overall deadline; its cause names the bound.
func (o Options) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	t := orDefault(o.Timeout, DefaultTimeout)
	return context.WithTimeoutCause(ctx, t, refuse.New(CodeTimeout, "the transfer did not finish within its overall deadline of %s (--timeout)", t))
}

func (o Options) concurrency() int {
	if o.Concurrency <= 0 {
		return 4
	}
	return o.Concurrency
}

// repository parses ref and builds the authenticated, TLS-verifying client for it.
func repository(ref string, o Options) (*remote.Repository, registry.Reference, error) {
	r, err := registry.ParseReference(ref)
	if err != nil {
		return nil, registry.Reference{}, refuse.Wrap(CodeReference, err, "reference %q", ref)
	}
	if o.PlainHTTP && !loopback(r.Registry) {
		return nil, registry.Reference{}, refuse.New(CodePlainHTTP, "plain HTTP to %s refused: only a literal loopback address may be reached without TLS", r.Registry)
	}
	roots, err := x509.SystemCertPool()
	if err != nil {
		roots = x509.NewCertPool()
	}
	if o.CAFile != "" {
		// The one bounded reader: a FIFO, a device or an oversized file is refused at once.
		pem, err := input.ReadFile(o.CAFile, maxCAFile)
		if err != nil {
			return nil, registry.Reference{}, err
		}
		if !roots.AppendCertsFromPEM(pem) {
			return nil, registry.Reference{}, refuse.New(CodeTLS, "CA bundle %s holds no PEM certificate", o.CAFile)
		}
	}
	creds, err := loadDockerConfig()
	if err != nil {
		return nil, registry.Reference{}, err
	}
	wait := orDefault(o.ResponseTimeout, DefaultResponseTimeout)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	tr.DialContext = (&net.Dialer{Timeout: wait, KeepAlive: 30 * time.Second}).DialContext
	tr.TLSHandshakeTimeout = wait
	tr.ResponseHeaderTimeout = wait
	tr.ExpectContinueTimeout = time.Second
	repo := &remote.Repository{
		Client: &auth.Client{
			Client: &http.Client{
				Transport:     &idleTransport{next: tr, idle: orDefault(o.IdleTimeout, DefaultIdleTimeout)},
				CheckRedirect: checkRedirect(r.Registry, o.PlainHTTP),
			},
			Cache:      auth.NewCache(),
			Credential: creds.credential,
		},
		Reference: r,
		PlainHTTP: o.PlainHTTP,
	}
	return repo, r, nil
}

func loopback(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// classify turns a registry client error into a refusal with the code of its cause.
func classify(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	if _, ok := refuse.As(err); ok {
		return err
	}
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return refuse.Wrap(CodeTimeout, err, format+" (no answer within the bound; see --response-timeout)", args...)
	case errors.Is(err, context.Canceled):
		return refuse.Wrap(CodeInterrupted, err, format+" (interrupted)", args...)
	}
	var cv *tls.CertificateVerificationError
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	var ci x509.CertificateInvalidError
	var rh tls.RecordHeaderError
	switch {
	case errors.As(err, &cv), errors.As(err, &ua), errors.As(err, &hn), errors.As(err, &ci):
		return refuse.Wrap(CodeTLS, err, format, args...)
	case errors.As(err, &rh):
		return refuse.Wrap(CodeTLS, err, format+" (the registry does not speak TLS)", args...)
	}
	var er *errcode.ErrorResponse
	if errors.As(err, &er) {
		switch er.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden:
			return refuse.Wrap(CodeAuth, err, format, args...)
		case http.StatusNotFound:
			return refuse.Wrap(CodeNotFound, err, format, args...)
		}
	}
	if errors.Is(err, auth.ErrBasicCredentialNotFound) {
		return refuse.Wrap(CodeAuth, err, format+" (the docker configuration has no credentials for this registry)", args...)
	}
	if errors.Is(err, errdef.ErrInvalidReference) {
		return refuse.Wrap(CodeReference, err, format, args...)
	}
	if errors.Is(err, errdef.ErrNotFound) {
		return refuse.Wrap(CodeNotFound, err, format, args...)
	}
	return refuse.Wrap(CodeRegistry, err, format, args...)
}
