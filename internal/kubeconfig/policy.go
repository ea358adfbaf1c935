package kubeconfig

import (
	"strings"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/qinglong/ql3/internal/refuse"
)

// forbidden maps a key (lower-cased, so a case variant cannot slip past) inside a users[].user or
// clusters[].cluster entry to the refusal its mere presence raises, whatever its value: a key
// that is present but "off" today is one edit away from being on.
var forbiddenUser = map[string]refuse.Code{
	"exec":               CodeExecForbidden,
	"auth-provider":      CodeAuthProviderForbidden,
	"tokenfile":          CodeFileReference,
	"client-certificate": CodeFileReference,
	"client-key":         CodeFileReference,
	"as":                 CodeImpersonation,
	"as-uid":             CodeImpersonation,
	"as-groups":          CodeImpersonation,
	"as-user-extra":      CodeImpersonation,
}

var forbiddenCluster = map[string]refuse.Code{
	"certificate-authority":    CodeFileReference,
	"insecure-skip-tls-verify": CodeInsecure,
	"proxy-url":                CodeProxy,
}

// checkTree inspects every entry of the three named lists. It also refuses repeated names
// itself, because clientcmd's own duplicate-name error prints the whole list, credentials
// included.
func checkTree(tree map[string]any) error {
	lists := []struct {
		key, inner string
		forbidden  map[string]refuse.Code
	}{
		{"clusters", "cluster", forbiddenCluster},
		{"users", "user", forbiddenUser},
		{"contexts", "context", nil},
	}
	for _, l := range lists {
		v, ok := tree[l.key]
		if !ok || v == nil {
			continue
		}
		items, ok := v.([]any)
		if !ok {
			return refuse.New(CodeInvalid, "kubeconfig field %s is not a list", l.key)
		}
		seen := map[string]bool{}
		for i, it := range items {
			entry, ok := it.(map[string]any)
			if !ok {
				return refuse.New(CodeInvalid, "kubeconfig field %s[%d] is not a mapping", l.key, i)
			}
			name, _ := entry["name"].(string)
			if seen[name] {
				return refuse.New(CodeContextAmbiguous, "kubeconfig field %s names %q more than once", l.key, name)
			}
			seen[name] = true
			body, ok := entry[l.inner]
			if !ok || body == nil {
				continue
			}
			m, ok := body.(map[string]any)
			if !ok {
				return refuse.New(CodeInvalid, "kubeconfig field %s[%d].%s is not a mapping", l.key, i, l.inner)
			}
			for k := range m {
				if code, bad := l.forbidden[strings.ToLower(k)]; bad {
					return refuse.New(code, "kubeconfig %s %q sets %s, which ql3 forbids", l.inner, name, k)
				}
			}
		}
	}
	return nil
}

// checkParsed repeats the policy on kubectl's own reading, so a spelling the tree walk missed
// but the decoder accepts is still refused.
func checkParsed(cfg *clientcmdapi.Config) error {
	for name, a := range cfg.AuthInfos {
		switch {
		case a == nil:
		case a.Exec != nil:
			return refuse.New(CodeExecForbidden, "kubeconfig user %q sets exec, which ql3 forbids", name)
		case a.AuthProvider != nil:
			return refuse.New(CodeAuthProviderForbidden, "kubeconfig user %q sets auth-provider, which ql3 forbids", name)
		case a.TokenFile != "" || a.ClientCertificate != "" || a.ClientKey != "":
			return refuse.New(CodeFileReference, "kubeconfig user %q references a file, which ql3 forbids", name)
		case a.Impersonate != "" || a.ImpersonateUID != "" || len(a.ImpersonateGroups) > 0 || len(a.ImpersonateUserExtra) > 0:
			return refuse.New(CodeImpersonation, "kubeconfig user %q impersonates, which ql3 forbids", name)
		}
	}
	for name, c := range cfg.Clusters {
		switch {
		case c == nil:
		case c.CertificateAuthority != "":
			return refuse.New(CodeFileReference, "kubeconfig cluster %q references a file, which ql3 forbids", name)
		case c.InsecureSkipTLSVerify:
			return refuse.New(CodeInsecure, "kubeconfig cluster %q sets insecure-skip-tls-verify, which ql3 forbids", name)
		case c.ProxyURL != "":
			return refuse.New(CodeProxy, "kubeconfig cluster %q sets proxy-url, which ql3 forbids", name)
		}
	}
	return nil
}
