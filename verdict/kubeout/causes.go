package kubeout

import (
	"bytes"
	"fmt"
	"regexp"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/refuse"
)

// Reason codes of a kubectl run that exited non-zero, by the cause its stderr names. Classify
// derives them from kubectl's stderr; a stderr that names none of them keeps its step's generic code.
const (
	// CodeConnectionRefused: nothing listens at the kubeconfig's server address.
	CodeConnectionRefused refuse.Code = "API_CONNECTION_REFUSED"
	// CodeTimeout: the API server did not answer in time (kubectl's own client timeout, or the
	// step timeout after which ql3 killed kubectl).
	CodeTimeout refuse.Code = "API_TIMEOUT"
	// CodeTLS: the TLS handshake with the API server failed (unknown authority, name mismatch,
	// expired or rejected certificate).
	CodeTLS refuse.Code = "API_TLS"
	// CodeUnauthorized: the API server does not accept the kubeconfig's credential (401).
	CodeUnauthorized refuse.Code = "API_UNAUTHORIZED"
	// CodeForbidden: the API server forbids the request (403); the verb and resource are named.
	CodeForbidden refuse.Code = "API_FORBIDDEN"
	// CodeNotFound: an object, namespace or kind the step needs does not exist on the server.
	CodeNotFound refuse.Code = "API_NOT_FOUND"
	// CodeServerError: the API server answered with a server error (5xx: its storage unavailable,
	// an internal error, a server-side timeout).
	CodeServerError refuse.Code = "API_SERVER_ERROR"
)

// Cause is what a failed kubectl run's stderr says went wrong, in low-sensitivity terms: Detail
// is built from fixed phrases and, for a few facts (verb, resource, object name), from strictly
// matched identifier characters rendered with refuse.Ident. Nothing else of stderr reaches it.
type Cause struct {
	Code   refuse.Code // "" when Classify recognises no cause
	Detail string      // what happened, for the refusal message
	Hint   string      // what to check
}

var (
	// Server-side answers carry kubectl's "Error from server (Reason)" tag; the server answered,
	// so they are checked before the transport failures, whose words can appear inside them.
	reForbiddenRBAC = regexp.MustCompile(`cannot ([a-z]{1,32}) resource "([a-z0-9.\-/]{1,128})" in API group "([a-z0-9.\-]{0,128})"`)
	reNotFoundObj   = regexp.MustCompile(`\(NotFound\)[^\n]*?\b([a-z0-9.\-]{1,128}) "([a-z0-9.\-]{1,253})" not found`)
	reNoKind        = regexp.MustCompile(`no matches for kind "([A-Za-z0-9]{1,63})" in version "([a-z0-9.\-/]{1,128})"`)
)

// Hints of the causes; the recipe reference is shared with the kubeconfig policy's hints.
const (
	hintRefused      = "nothing listens at the kubeconfig's server address: check that the API server is up and that the kubeconfig names the right host and port"
	hintTimeout      = "the API server did not answer in time: check that it is up and not overloaded and that the network between here and it passes traffic, or raise --step-timeout"
	hintTLS          = "the kubeconfig's certificate-authority-data must be the CA that signed the API server's certificate, for the host name of its server address"
	hintUnauthorized = "the credential is expired, revoked or unknown to this cluster (a token of a deleted ServiceAccount, an expired bound token): make a new kubeconfig, see docs/kubeconfig.md#recipe-a-serviceaccount-kubeconfig-eks-gke-aks"
	hintForbidden    = "grant the kubeconfig's user that verb on that resource (server-side apply needs get, create and patch; the identity read needs get on namespace kube-system), see docs/kubeconfig.md#recipe-a-serviceaccount-kubeconfig-eks-gke-aks"
	hintNotFound     = "create what is missing first (ql3 never creates a namespace or installs a CRD), or check that the kubeconfig names the intended cluster"
	hintServerError  = "the API server is up but cannot serve the request: check its storage (etcd), its aggregated APIs and admission webhooks, then run again"
)

// Classify reads the cause of a failed run from kubectl's stderr. It is a pure function of its
// input and never echoes stderr beyond the facts named in Cause.
func Classify(stderr []byte) Cause {
	has := func(subs ...string) bool {
		for _, s := range subs {
			if bytes.Contains(stderr, []byte(s)) {
				return true
			}
		}
		return false
	}
	switch {
	case has("(Forbidden)", " is forbidden: "):
		c := Cause{Code: CodeForbidden, Detail: "the API server forbids the request", Hint: hintForbidden}
		if m := reForbiddenRBAC.FindSubmatch(stderr); m != nil {
			c.Detail = fmt.Sprintf("the API server forbids the kubeconfig's user to %s %s", refuse.Ident(string(m[1])), refuse.Ident(resourceName(m[2], m[3])))
		}
		return c
	case has("(Unauthorized)", "You must be logged in to the server", "the server has asked for the client to provide credentials"):
		return Cause{Code: CodeUnauthorized, Detail: "the API server does not accept the kubeconfig's credential (401 Unauthorized)", Hint: hintUnauthorized}
	case has("(NotFound)", "no matches for kind", "the server could not find the requested resource"):
		c := Cause{Code: CodeNotFound, Detail: "the API server does not have something the step needs (404 Not Found)", Hint: hintNotFound}
		if m := reNotFoundObj.FindSubmatch(stderr); m != nil {
			c.Detail = fmt.Sprintf("%s %s does not exist on the API server", refuse.Ident(string(m[1])), refuse.Ident(string(m[2])))
		} else if m := reNoKind.FindSubmatch(stderr); m != nil {
			c.Detail = fmt.Sprintf("the API server does not serve kind %s in version %s", refuse.Ident(string(m[1])), refuse.Ident(string(m[2])))
		}
		return c
	case has("(InternalError)", "(ServiceUnavailable)", "(Timeout)", "(InternalServerError)", "(BadGateway)",
		"the server is currently unable to handle the request", "Internal error occurred", "etcdserver:",
		"an error on the server", "the server was unable to return a response in the time allotted",
		"INTERNAL_ERROR; received from peer"):
		return Cause{Code: CodeServerError, Detail: "the API server answered with a server error (5xx)", Hint: hintServerError}
	}
	// Transport failures: kubectl never reached a server answer.
	switch {
	case has("x509: certificate signed by unknown authority", "certificate is not trusted"):
		return tlsCause("the API server's certificate is not signed by the kubeconfig's certificate authority")
	case has("x509: certificate is valid for", "x509: cannot validate certificate for", "doesn't contain any IP SANs"):
		return tlsCause("the API server's certificate does not name the kubeconfig's server address")
	case has("x509: certificate has expired or is not yet valid"):
		return tlsCause("the API server's certificate has expired or is not yet valid")
	case has("tls: bad certificate", "tls: unknown certificate authority", "tls: certificate required", "tls: expired certificate"):
		return tlsCause("the API server rejected the kubeconfig's client certificate")
	case has("x509: ", "tls: "):
		return tlsCause("the TLS handshake with the API server failed")
	case has("connect: connection refused", "was refused - did you specify the right host or port?"):
		return Cause{Code: CodeConnectionRefused, Detail: "the API server refused the connection", Hint: hintRefused}
	case has("Client.Timeout exceeded", "i/o timeout", "context deadline exceeded", "TLS handshake timeout",
		"timeout awaiting response headers", "request canceled while waiting for connection"):
		return Cause{Code: CodeTimeout, Detail: "the API server did not answer in time", Hint: hintTimeout}
	}
	return Cause{}
}

func tlsCause(detail string) Cause {
	return Cause{Code: CodeTLS, Detail: detail, Hint: hintTLS}
}

// resourceName is kubectl's resource.group form ("deployments.apps", "configmaps").
func resourceName(resource, group []byte) string {
	if len(group) == 0 {
		return string(resource)
	}
	return string(resource) + "." + string(group)
}

// StoreRef is how a refusal points at a stored stderr blob.
func StoreRef(d digest.Digest) string { return "see: ql3 store cat " + string(d) }

// Refusal is the refusal of step's non-zero exit for cause c; stderr is the digest of the stored
// stderr blob, which the message points to.
func (c Cause) Refusal(step string, exit int, stderr digest.Digest) *refuse.Error {
	return refuse.New(c.Code, "%s: %s (kubectl exited %d; %s)", step, c.Detail, exit, StoreRef(stderr)).WithHint("%s", c.Hint)
}

// StepTimeout is the refusal of a step whose run ql3 killed at the step timeout (or the caller's
// deadline): the timeout cause, whatever kubectl had written by then.
func StepTimeout(step string, timeout fmt.Stringer, stderr digest.Digest) *refuse.Error {
	return refuse.New(CodeTimeout, "%s: kubectl did not finish within the step timeout (%s) or the caller's deadline and was killed: the API server did not answer in time (%s)",
		step, timeout, StoreRef(stderr)).WithHint("%s", hintTimeout)
}
