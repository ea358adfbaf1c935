// Package kubeconfig enforces ql3's kubeconfig policy (DESIGN §5).
//
// The file is read twice: once as a plain YAML tree, to see every key that is present whatever
// its value and in every entry (not only the selected one), and once with clientcmd.Load, the
// decoder kubectl itself uses, so that what we summarise is what kubectl will act on. The raw
// bytes are a credential: no message, error or summary carries any of their values, and errors
// from the decoders are never wrapped verbatim because they can echo file content.
package kubeconfig

import (
	"bytes"
	"encoding/json"
	"net/url"

	"github.com/opencontainers/go-digest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/refuse"
)

// MaxSize bounds the kubeconfig we are willing to parse; a real one is a few KiB.
const MaxSize = 1 << 20

const (
	CodeInvalid               refuse.Code = "KUBECONFIG_INVALID"
	CodeDuplicateKey          refuse.Code = "KUBECONFIG_DUPLICATE_KEY"
	CodeContextMissing        refuse.Code = "KUBECONFIG_CONTEXT_MISSING"
	CodeContextAmbiguous      refuse.Code = "KUBECONFIG_CONTEXT_AMBIGUOUS"
	CodeServerInsecure        refuse.Code = "KUBECONFIG_SERVER_INSECURE"
	CodeCAMissing             refuse.Code = "KUBECONFIG_CA_MISSING"
	CodeAuthMissing           refuse.Code = "KUBECONFIG_AUTH_MISSING"
	CodeAuthAmbiguous         refuse.Code = "KUBECONFIG_AUTH_AMBIGUOUS"
	CodeExecForbidden         refuse.Code = "KUBECONFIG_EXEC_FORBIDDEN"
	CodeAuthProviderForbidden refuse.Code = "KUBECONFIG_AUTH_PROVIDER_FORBIDDEN"
	CodeFileReference         refuse.Code = "KUBECONFIG_FILE_REFERENCE"
	CodeInsecure              refuse.Code = "KUBECONFIG_INSECURE"
	CodeProxy                 refuse.Code = "KUBECONFIG_PROXY"
	CodeImpersonation         refuse.Code = "KUBECONFIG_IMPERSONATION"
)

// Check applies the policy to raw and, for the named context, returns the redacted summary.
func Check(raw []byte, context string) (*evidence.KubeconfigSummary, error) {
	if len(raw) > MaxSize {
		return nil, refuse.New(CodeInvalid, "kubeconfig is %d bytes, more than the %d byte ceiling", len(raw), MaxSize)
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, refuse.New(CodeInvalid, "kubeconfig is empty")
	}
	if _, err := yaml.YAMLToJSON(raw); err != nil {
		return nil, refuse.New(CodeInvalid, "kubeconfig is not valid yaml")
	}
	js, err := yaml.YAMLToJSONStrict(raw)
	if err != nil {
		// The strict reader fails only where the lenient one succeeded: a repeated key.
		return nil, refuse.New(CodeDuplicateKey, "kubeconfig repeats a mapping key")
	}
	var tree map[string]any
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	if err := dec.Decode(&tree); err != nil || tree == nil {
		return nil, refuse.New(CodeInvalid, "kubeconfig is not a yaml mapping")
	}
	if err := checkTree(tree); err != nil {
		return nil, err
	}
	cfg, err := clientcmd.Load(raw)
	if err != nil {
		return nil, refuse.New(CodeInvalid, "kubeconfig does not decode as a v1 Config")
	}
	if err := checkParsed(cfg); err != nil {
		return nil, err
	}
	return summarise(raw, cfg, context)
}

func summarise(raw []byte, cfg *clientcmdapi.Config, name string) (*evidence.KubeconfigSummary, error) {
	if name == "" {
		return nil, refuse.New(CodeContextMissing, "no context named")
	}
	ctx, ok := cfg.Contexts[name]
	if !ok || ctx == nil {
		return nil, refuse.New(CodeContextMissing, "context %q is not in the kubeconfig", name)
	}
	cl, ok := cfg.Clusters[ctx.Cluster]
	if ctx.Cluster == "" || !ok || cl == nil {
		return nil, refuse.New(CodeContextMissing, "context %q names cluster %q, which is not in the kubeconfig", name, ctx.Cluster)
	}
	user, ok := cfg.AuthInfos[ctx.AuthInfo]
	if ctx.AuthInfo == "" || !ok || user == nil {
		return nil, refuse.New(CodeContextMissing, "context %q names user %q, which is not in the kubeconfig", name, ctx.AuthInfo)
	}
	u, err := url.Parse(cl.Server)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil {
		return nil, refuse.New(CodeServerInsecure, "cluster %q server is not an https url with a host", ctx.Cluster)
	}
	if len(cl.CertificateAuthorityData) == 0 {
		return nil, refuse.New(CodeCAMissing, "cluster %q has no certificate-authority-data", ctx.Cluster).
			WithHint("ql3 requires the cluster CA inline so that the pinned kubeconfig alone decides trust")
	}
	kind, err := authKind(ctx.AuthInfo, user)
	if err != nil {
		return nil, err
	}
	return &evidence.KubeconfigSummary{
		Schema:   evidence.SchemaKubeconfig,
		Digest:   digest.FromBytes(raw),
		Context:  name,
		Cluster:  ctx.Cluster,
		Server:   cl.Server,
		CADigest: digest.FromBytes(cl.CertificateAuthorityData),
		User:     ctx.AuthInfo,
		AuthKind: kind,
	}, nil
}

// authKind demands exactly one complete inline credential; half of a pair counts as present, so
// a stray username beside a token is ambiguous rather than silently ignored.
func authKind(name string, a *clientcmdapi.AuthInfo) (string, error) {
	type kind struct {
		name              string
		present, complete bool
	}
	kinds := []kind{
		{evidence.AuthClientCertificate, len(a.ClientCertificateData) > 0 || len(a.ClientKeyData) > 0,
			len(a.ClientCertificateData) > 0 && len(a.ClientKeyData) > 0},
		{evidence.AuthToken, a.Token != "", a.Token != ""},
		{evidence.AuthBasic, a.Username != "" || a.Password != "", a.Username != "" && a.Password != ""},
	}
	var found []kind
	for _, k := range kinds {
		if k.present {
			found = append(found, k)
		}
	}
	switch {
	case len(found) == 0:
		return "", refuse.New(CodeAuthMissing, "user %q carries no inline credential", name)
	case len(found) > 1:
		return "", refuse.New(CodeAuthAmbiguous, "user %q carries %d credential kinds (%s and %s), exactly one is allowed",
			name, len(found), found[0].name, found[1].name)
	case !found[0].complete:
		return "", refuse.New(CodeAuthMissing, "user %q carries an incomplete %s credential", name, found[0].name)
	}
	return found[0].name, nil
}
