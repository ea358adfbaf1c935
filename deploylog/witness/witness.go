// Package witness is the log's side of the C2SP tlog-witness protocol: it submits a signed
// checkpoint with a consistency proof to a witness's add-checkpoint endpoint and returns the
// witness's cosignatures (tlog-cosignature) once they verify under the witness key the caller
// names. Every failure is a refusal with a WITNESS_ code (docs/log.md, "Witnesses and policy").
package witness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/qinglong/ql3/deploylog/policy"
	"github.com/qinglong/ql3/refuse"
)

// Reason codes raised by this package.
const (
	CodeURL             refuse.Code = "WITNESS_URL"              // the witness URL is not an http(s) URL without credentials, query or fragment
	CodeUnreachable     refuse.Code = "WITNESS_UNREACHABLE"      // no answer: connection, timeout, or a 5xx status
	CodeUnknownLog      refuse.Code = "WITNESS_UNKNOWN_LOG"      // 404: the witness does not know the checkpoint's origin
	CodeRefused         refuse.Code = "WITNESS_REFUSED"          // 403 (no signature of a log key it trusts), 400, or another 4xx
	CodeAhead           refuse.Code = "WITNESS_AHEAD"            // the witness has cosigned a larger tree than the checkpoint: the log was rolled back
	CodeInconsistent    refuse.Code = "WITNESS_INCONSISTENT"     // 422, or 409 at the checkpoint's own size: the log is not consistent with what the witness saw
	CodeConflict        refuse.Code = "WITNESS_CONFLICT"         // 409 again after the retry from the witness's size (another submitter is racing)
	CodeResponseInvalid refuse.Code = "WITNESS_RESPONSE_INVALID" // an answer the protocol does not allow (body, size, type, status)
	CodeCosignature     refuse.Code = "WITNESS_COSIGNATURE"      // a 200 answer without a valid cosignature of the given witness key
	CodeCheckpoint      refuse.Code = "WITNESS_CHECKPOINT"       // the checkpoint to submit is not a signed checkpoint note, or its proof cannot be made
)

// Bounds on one exchange.
const (
	DefaultTimeout   = 30 * time.Second // the whole request, connection to last byte
	dialTimeout      = 10 * time.Second
	MaxResponseSize  = 64 << 10 // a 200 answer is a few signature lines
	maxProofLines    = 63       // the spec's limit on consistency proof lines
	conflictBodySize = 32       // "N\n" of a 409
)

// Client submits checkpoints to one witness.
type Client struct {
	url      string // the add-checkpoint endpoint
	shown    string // the URL as messages show it
	verifier *policy.CosignatureVerifier
	http     *http.Client
}

// New returns a client of the witness whose submission prefix is rawURL and whose cosignatures
// verify under v. timeout bounds each request (0: DefaultTimeout). Redirects are not followed:
// a witness answers add-checkpoint itself.
func New(rawURL string, v *policy.CosignatureVerifier, timeout time.Duration) (*Client, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return nil, refuse.New(CodeURL, "the witness URL is not an http or https URL with a host and no credentials, query or fragment")
	}
	if v == nil {
		return nil, refuse.New(CodeCosignature, "no witness key to verify the cosignatures with")
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	shown := u.Scheme + "://" + u.Host + u.Path
	endpoint := *u
	endpoint.Path = strings.TrimSuffix(u.Path, "/") + "/add-checkpoint"
	endpoint.RawPath = ""
	return &Client{
		url:      endpoint.String(),
		shown:    shown,
		verifier: v,
		http: &http.Client{
			Timeout: timeout,
			Transport: &http.Transport{
				Proxy:                 http.ProxyFromEnvironment,
				DialContext:           (&net.Dialer{Timeout: dialTimeout}).DialContext,
				TLSHandshakeTimeout:   dialTimeout,
				ResponseHeaderTimeout: timeout,
				MaxIdleConnsPerHost:   1,
				ForceAttemptHTTP2:     true,
			},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}, nil
}

// ConflictError is the witness's 409 answer: the size of the latest tree it cosigned.
type ConflictError struct{ Size int64 }

func (e *ConflictError) Error() string {
	return fmt.Sprintf("the witness's latest cosigned tree has size %d", e.Size)
}

// AddCheckpoint makes one add-checkpoint request: old size oldSize, proof from it to the
// checkpoint, the signed checkpoint note. On 200 it returns the cosignature lines of the
// client's witness key that verify over the checkpoint (lines of other keys are dropped, as the
// spec asks). A 409 is a CodeConflict refusal wrapping *ConflictError.
func (c *Client) AddCheckpoint(ctx context.Context, oldSize int64, proof tlog.TreeProof, signed []byte) ([]byte, error) {
	if oldSize < 0 || len(proof) > maxProofLines {
		return nil, refuse.New(CodeCheckpoint, "old size %d with %d proof lines is not a request the protocol allows", oldSize, len(proof))
	}
	var body bytes.Buffer
	body.WriteString("old " + strconv.FormatInt(oldSize, 10) + "\n")
	for _, h := range proof {
		body.WriteString(h.String() + "\n")
	}
	body.WriteString("\n")
	body.Write(signed)

	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, &body)
	if err != nil {
		return nil, refuse.Wrap(CodeURL, err, "witness request")
	}
	req.Header.Set("Content-Type", "text/plain; charset=utf-8")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, refuse.New(CodeUnreachable, "witness %s: %s", c.shown, transportReason(err))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseSize+1))
	if err != nil {
		return nil, refuse.New(CodeUnreachable, "witness %s: reading the answer: %s", c.shown, transportReason(err))
	}
	if len(raw) > MaxResponseSize {
		return nil, refuse.New(CodeResponseInvalid, "witness %s answered %d with more than %d bytes", c.shown, resp.StatusCode, MaxResponseSize)
	}
	switch code := resp.StatusCode; {
	case code == http.StatusOK:
		return c.cosignatures(raw, signed)
	case code == http.StatusConflict:
		n, err := conflictSize(resp.Header.Get("Content-Type"), raw)
		if err != nil {
			return nil, refuse.Wrap(CodeResponseInvalid, err, "witness %s answered 409", c.shown)
		}
		return nil, refuse.Wrap(CodeConflict, &ConflictError{Size: n}, "witness %s: old size %d", c.shown, oldSize)
	case code == http.StatusNotFound:
		return nil, refuse.New(CodeUnknownLog, "witness %s does not know the checkpoint's origin (404)", c.shown).
			WithHint("the witness's operator registers the log's origin and key (witnessctl add-log, add-key)")
	case code == http.StatusUnprocessableEntity:
		return nil, refuse.New(CodeInconsistent, "witness %s refused the consistency proof from size %d (422): the log does not extend the tree the witness cosigned", c.shown, oldSize)
	case code == http.StatusForbidden:
		return nil, refuse.New(CodeRefused, "witness %s found no signature of a log key it trusts on the checkpoint (403)", c.shown)
	case code >= 400 && code < 500:
		return nil, refuse.New(CodeRefused, "witness %s refused the request (%d)", c.shown, code)
	case code >= 500:
		return nil, refuse.New(CodeUnreachable, "witness %s failed (%d)", c.shown, code)
	default:
		return nil, refuse.New(CodeResponseInvalid, "witness %s answered with status %d", c.shown, code)
	}
}

// cosignatures checks a 200 body: one or more note signature lines ("— name base64\n"); those
// of the client's key must verify over the checkpoint's text, and at least one must be there.
func (c *Client) cosignatures(body, signed []byte) ([]byte, error) {
	if len(body) == 0 || body[len(body)-1] != '\n' {
		return nil, refuse.New(CodeResponseInvalid, "witness %s answered 200 without newline-terminated signature lines", c.shown)
	}
	for _, l := range bytes.SplitAfter(body[:len(body)-1], []byte("\n")) {
		if !bytes.HasPrefix(l, []byte("— ")) {
			return nil, refuse.New(CodeResponseInvalid, "witness %s answered 200 with a line that is not a note signature", c.shown)
		}
	}
	// The signed checkpoint with the answer appended is a note whose only known key is the
	// witness's: note.Open checks each of its lines and leaves the rest (the log's) unverified.
	n, err := note.Open(append(append([]byte(nil), signed...), body...), note.VerifierList(c.verifier))
	var unverified *note.UnverifiedNoteError
	var invalid *note.InvalidSignatureError
	switch {
	case errors.As(err, &unverified):
		return nil, refuse.New(CodeCosignature, "witness %s answered with no cosignature of key %s", c.shown, refuse.Ident(c.verifier.Name())).
			WithHint("check --witness-key: it is the witness's cosignature key, type 0x04, named as the witness signs")
	case errors.As(err, &invalid):
		return nil, refuse.New(CodeCosignature, "the cosignature of key %s from witness %s does not verify over the checkpoint", refuse.Ident(c.verifier.Name()), c.shown)
	case err != nil:
		return nil, refuse.Wrap(CodeResponseInvalid, err, "witness %s answered 200 with lines that are not note signatures", c.shown)
	}
	var out bytes.Buffer
	for _, s := range n.Sigs {
		out.WriteString("— " + s.Name + " " + s.Base64 + "\n")
	}
	return out.Bytes(), nil
}

// conflictSize reads a 409 body: text/x.tlog.size, one canonical decimal and a newline.
func conflictSize(contentType string, body []byte) (int64, error) {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil || mt != "text/x.tlog.size" {
		return 0, errors.New("without Content-Type text/x.tlog.size")
	}
	s, ok := strings.CutSuffix(string(body), "\n")
	if !ok || len(body) > conflictBodySize {
		return 0, errors.New("with a body that is not one size line")
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != s {
		return 0, errors.New("with a size that is not a canonical decimal")
	}
	return n, nil
}

// transportReason names a transport failure without the URL (which the caller shows redacted).
func transportReason(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timed out"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return oe.Op + ": " + oe.Err.Error()
	}
	return err.Error()
}
