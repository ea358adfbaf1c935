package kubeconfig

import (
	"bytes"
	"path/filepath"
	"strings"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
)

// CodeExtractFileRef: a file the chosen context's cluster or user names (certificate-authority,
// client-certificate, client-key) cannot be read to be inlined.
const CodeExtractFileRef refuse.Code = "KUBECONFIG_EXTRACT_FILE"

// MaxReferencedFile bounds a certificate or key file that Extract inlines.
const MaxReferencedFile = 256 << 10

// staticCredential is the advice for a chosen user that needs a program or a file at run time.
const staticCredential = "give ql3 a static credential: create a ServiceAccount and a bound token with your current " +
	"kubeconfig (kubectl create serviceaccount, kubectl create token), then a kubeconfig that holds it inline"

// Extracted is what Extract made: the new kubeconfig's bytes, its summary and what was inlined.
type Extracted struct {
	Raw     []byte                      // the new kubeconfig: a credential, never printed
	Summary *evidence.KubeconfigSummary // as Check gives it for the new file
	Inlined []string                    // the file references replaced by their data, in a fixed order
}

// Extract makes, from a kubeconfig of any number of contexts, one that holds only the context
// name, its cluster and its user, with the files they reference inlined (certificate-authority,
// client-certificate and client-key become their -data forms), as `kubectl config view --minify
// --flatten` would, without running kubectl. A relative file reference is read against dir, the
// source kubeconfig's directory, as kubectl resolves it; readFile reads it (bounded, no symlink).
// The chosen user must carry a static credential: exec, an auth provider or a token file is
// refused with its policy code and advice on getting one. The result must pass Check, whose first
// violation refuses it otherwise. Nothing of the file's content reaches a message.
func Extract(raw []byte, name, dir string, readFile func(path string, ceiling int64) ([]byte, error)) (*Extracted, error) {
	if len(raw) > MaxSize {
		return nil, refuse.New(CodeInvalid, "kubeconfig is %d bytes, more than the %d byte ceiling", len(raw), MaxSize)
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, refuse.New(CodeInvalid, "kubeconfig is empty")
	}
	cfg, err := clientcmd.Load(raw)
	if err != nil {
		// The decoder's error can echo file content (a duplicate name prints the whole list).
		return nil, refuse.New(CodeInvalid, "kubeconfig does not decode as a v1 Config").
			WithHint("ql3 kubeconfig check names what is wrong with it")
	}
	ctx, ok := cfg.Contexts[name]
	if name == "" || !ok || ctx == nil {
		return nil, contextMissing(cfg, name)
	}
	cl, ok := cfg.Clusters[ctx.Cluster]
	if ctx.Cluster == "" || !ok || cl == nil {
		return nil, refuse.New(CodeContextMissing, "context %s names cluster %s, which is not in the kubeconfig", refuse.Ident(name), refuse.Ident(ctx.Cluster))
	}
	user, ok := cfg.AuthInfos[ctx.AuthInfo]
	if ctx.AuthInfo == "" || !ok || user == nil {
		return nil, refuse.New(CodeContextMissing, "context %s names user %s, which is not in the kubeconfig", refuse.Ident(name), refuse.Ident(ctx.AuthInfo))
	}
	switch {
	case user.Exec != nil:
		return nil, refuse.New(CodeExecForbidden, "context %s uses user %s, which runs an exec credential plugin", refuse.Ident(name), refuse.Ident(ctx.AuthInfo)).
			WithHint("%s; see %s", staticCredential, RecipeRef)
	case user.AuthProvider != nil:
		return nil, refuse.New(CodeAuthProviderForbidden, "context %s uses user %s, which runs an auth provider", refuse.Ident(name), refuse.Ident(ctx.AuthInfo)).
			WithHint("%s; see %s", staticCredential, RecipeRef)
	case user.TokenFile != "":
		return nil, refuse.New(CodeFileReference, "context %s uses user %s, whose token is read from a file at run time", refuse.Ident(name), refuse.Ident(ctx.AuthInfo)).
			WithHint("a token file is rotated under ql3's feet: %s; see %s", staticCredential, RecipeRef)
	}
	// Copies, so that the source's other entries and its origin fields stay behind.
	nc := cl.DeepCopy()
	nu := user.DeepCopy()
	nx := ctx.DeepCopy()
	nc.LocationOfOrigin, nu.LocationOfOrigin, nx.LocationOfOrigin = "", "", ""
	nc.Extensions, nu.Extensions, nx.Extensions = nil, nil, nil
	var inlined []string
	inline := func(key, entry, entryName string, path *string, data *[]byte) error {
		if *path == "" {
			return nil
		}
		p := *path
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		b, err := readFile(p, MaxReferencedFile)
		if err != nil {
			return refuse.Wrap(CodeExtractFileRef, err, "%s of %s %s", key, entry, refuse.Ident(entryName))
		}
		if len(*data) > 0 {
			return refuse.New(CodeAuthAmbiguous, "%s %s sets both %s and %s-data", entry, refuse.Ident(entryName), key, key)
		}
		*data, *path = b, ""
		inlined = append(inlined, key)
		return nil
	}
	if err := inline("certificate-authority", "cluster", ctx.Cluster, &nc.CertificateAuthority, &nc.CertificateAuthorityData); err != nil {
		return nil, err
	}
	if err := inline("client-certificate", "user", ctx.AuthInfo, &nu.ClientCertificate, &nu.ClientCertificateData); err != nil {
		return nil, err
	}
	if err := inline("client-key", "user", ctx.AuthInfo, &nu.ClientKey, &nu.ClientKeyData); err != nil {
		return nil, err
	}
	out := clientcmdapi.NewConfig()
	out.Clusters[ctx.Cluster] = nc
	out.AuthInfos[ctx.AuthInfo] = nu
	out.Contexts[name] = nx
	out.CurrentContext = name
	b, err := clientcmd.Write(*out)
	if err != nil {
		return nil, refuse.New(CodeInvalid, "the extracted kubeconfig cannot be encoded")
	}
	sum, err := Check(b, name)
	if err != nil {
		return nil, err
	}
	return &Extracted{Raw: b, Summary: sum, Inlined: inlined}, nil
}

// contextMissing refuses a context that is not in the file, naming the ones that are.
func contextMissing(cfg *clientcmdapi.Config, name string) *refuse.Error {
	names := sortedKeys(cfg.Contexts)
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = refuse.Ident(n)
	}
	if name == "" {
		return refuse.New(CodeContextMissing, "no context named").WithHint("the kubeconfig's contexts: %s", contextList(quoted))
	}
	return refuse.New(CodeContextMissing, "context %s is not in the kubeconfig", refuse.Ident(name)).
		WithHint("the kubeconfig's contexts: %s", contextList(quoted))
}

func contextList(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	const most = 20
	if len(names) > most {
		return strings.Join(names[:most], ", ") + ", ..."
	}
	return strings.Join(names, ", ")
}
