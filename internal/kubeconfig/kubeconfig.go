// Package kubeconfig enforces ql3's kubeconfig policy (docs/rationale.md#5-kubeconfig-policy).
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
	"regexp"
	"strconv"

	"github.com/opencontainers/go-digest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
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

// Check applies the policy to raw and, for the named context, returns the redacted summary. It
// refuses with the first violation in CheckAll's order.
func Check(raw []byte, context string) (*evidence.KubeconfigSummary, error) {
	sum, vs := CheckAll(raw, context)
	if len(vs) > 0 {
		return nil, vs[0]
	}
	return sum, nil
}

// CheckAll applies the policy like Check but goes on past a violation wherever the file can still
// be read, and returns every violation in a stable order: the file as a whole (size, YAML,
// repeated keys by line), then the tree walk (clusters, users, contexts, each in file order; the
// keys of one entry in name order), then what only kubectl's decoder shows, then the selected
// context, its cluster and its user. The summary is nil unless there is no violation. Every
// violation's hint points to the recipe in docs/kubeconfig.md.
func CheckAll(raw []byte, context string) (*evidence.KubeconfigSummary, []*refuse.Error) {
	var vs violations
	if len(raw) > MaxSize {
		return nil, vs.add(refuse.New(CodeInvalid, "kubeconfig is %d bytes, more than the %d byte ceiling", len(raw), MaxSize))
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, vs.add(refuse.New(CodeInvalid, "kubeconfig is empty"))
	}
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return nil, vs.add(refuse.New(CodeInvalid, "kubeconfig is not valid yaml"))
	}
	if _, err := yaml.YAMLToJSONStrict(raw); err != nil {
		// The strict reader fails only where the lenient one succeeded: a repeated key. Its error
		// names the key and the line; only the line is kept (a key is file content).
		vs.duplicates(err)
	}
	var tree map[string]any
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	if err := dec.Decode(&tree); err != nil || tree == nil {
		return nil, vs.add(refuse.New(CodeInvalid, "kubeconfig is not a yaml mapping"))
	}
	own := owners{}
	seen := vs.checkTree(tree, own)
	cfg, err := clientcmd.Load(raw)
	if err != nil {
		// clientcmd refuses a repeated name itself; the walk has named that violation already,
		// and without the decoder's reading the context cannot be checked any further.
		if vs.has(CodeContextAmbiguous) {
			return nil, vs
		}
		return nil, vs.add(refuse.New(CodeInvalid, "kubeconfig does not decode as a v1 Config"))
	}
	vs.checkParsed(cfg, seen, own)
	sum := vs.summarise(raw, cfg, context)
	attribute(own, cfg, context)
	if len(vs) > 0 {
		return nil, vs
	}
	return sum, nil
}

// violations collects refusals in the order the policy finds them.
type violations []*refuse.Error

// add appends e with its hint completed by the pointer to the recipe, and returns the list.
func (vs *violations) add(e *refuse.Error) violations {
	advice := adviceFor[e.Code]
	if e.Hint != "" {
		advice = e.Hint
	}
	e.Hint = advice + "; see " + RecipeRef
	*vs = append(*vs, e)
	return *vs
}

// RecipeRef is where an operator learns to build a kubeconfig the policy accepts, also for a
// cluster whose own kubeconfig runs an exec plugin.
const RecipeRef = "docs/kubeconfig.md#recipe-a-serviceaccount-kubeconfig-eks-gke-aks"

var adviceFor = map[refuse.Code]string{
	CodeInvalid:               "give ql3 a v1 Config kubeconfig of at most 1 MiB",
	CodeDuplicateKey:          "remove the repeated key: readers disagree on which value wins",
	CodeContextMissing:        "name a context whose cluster and user are in the file",
	CodeContextAmbiguous:      "give every context, cluster and user a name of its own",
	CodeServerInsecure:        "the cluster's server must be an https url with a host",
	CodeCAMissing:             "put the cluster CA inline as certificate-authority-data",
	CodeAuthMissing:           "give the selected user one complete inline credential, such as a ServiceAccount token",
	CodeAuthAmbiguous:         "keep exactly one credential kind on the selected user",
	CodeExecForbidden:         "ql3 runs no credential plugin: use an inline ServiceAccount token instead",
	CodeAuthProviderForbidden: "ql3 runs no auth provider: use an inline ServiceAccount token instead",
	CodeFileReference:         "inline the data (token, client-certificate-data, client-key-data, certificate-authority-data) instead of a file path",
	CodeInsecure:              "remove insecure-skip-tls-verify and inline the cluster CA",
	CodeProxy:                 "remove proxy-url: kubectl must reach the API server directly",
	CodeImpersonation:         "remove the impersonation keys and give the identity that should act its own credential",
}

func (vs violations) has(code refuse.Code) bool {
	for _, e := range vs {
		if e.Code == code {
			return true
		}
	}
	return false
}

// reDupLine is one repeated key in the strict reader's error: `line N: key "K" already set in map`.
var reDupLine = regexp.MustCompile(`line (\d+): key .* already set in map`)

func (vs *violations) duplicates(err error) {
	found := false
	for _, m := range reDupLine.FindAllStringSubmatch(err.Error(), -1) {
		if n, cerr := strconv.Atoi(m[1]); cerr == nil {
			vs.add(refuse.New(CodeDuplicateKey, "kubeconfig repeats a mapping key at line %d", n))
			found = true
		}
	}
	if !found {
		vs.add(refuse.New(CodeDuplicateKey, "kubeconfig repeats a mapping key"))
	}
}

func (vs *violations) summarise(raw []byte, cfg *clientcmdapi.Config, name string) *evidence.KubeconfigSummary {
	ctx, ok := cfg.Contexts[name]
	if name == "" || !ok || ctx == nil {
		vs.add(contextMissing(cfg, name))
		return nil
	}
	before := len(*vs)
	cl, ok := cfg.Clusters[ctx.Cluster]
	if ctx.Cluster == "" || !ok || cl == nil {
		vs.add(refuse.New(CodeContextMissing, "context %q names cluster %q, which is not in the kubeconfig", name, ctx.Cluster))
		cl = nil
	}
	user, ok := cfg.AuthInfos[ctx.AuthInfo]
	if ctx.AuthInfo == "" || !ok || user == nil {
		vs.add(refuse.New(CodeContextMissing, "context %q names user %q, which is not in the kubeconfig", name, ctx.AuthInfo))
		user = nil
	}
	if cl != nil {
		u, err := url.Parse(cl.Server)
		if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil {
			vs.add(refuse.New(CodeServerInsecure, "cluster %q server is not an https url with a host", ctx.Cluster))
		}
		if len(cl.CertificateAuthorityData) == 0 {
			vs.add(refuse.New(CodeCAMissing, "cluster %q has no certificate-authority-data", ctx.Cluster).
				WithHint("ql3 requires the cluster CA inline so that the pinned kubeconfig alone decides trust"))
		}
	}
	var kind string
	if user != nil {
		var err *refuse.Error
		if kind, err = authKind(ctx.AuthInfo, user); err != nil {
			vs.add(err)
		}
	}
	if len(*vs) > before {
		return nil
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
	}
}

// authKind demands exactly one complete inline credential; half of a pair counts as present, so
// a stray username beside a token is ambiguous rather than silently ignored.
func authKind(name string, a *clientcmdapi.AuthInfo) (string, *refuse.Error) {
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
