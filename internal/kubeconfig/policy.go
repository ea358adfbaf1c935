package kubeconfig

import (
	"slices"
	"strings"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/qinglong/ql3/refuse"
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

// reported is what the tree walk refused, by entry ("user/NAME", "cluster/NAME") and code, so the
// second reading on kubectl's decoder adds only what the walk missed.
type reported map[string]map[refuse.Code]bool

// entryRef names the cluster or user entry a violation is about.
type entryRef struct{ inner, name string }

// owners maps a violation to its entry, so that CheckAll can say whether the chosen context uses
// that entry.
type owners map[*refuse.Error]entryRef

// addEntry adds e as a violation of entry inner/name.
func (vs *violations) addEntry(own owners, inner, name string, e *refuse.Error) {
	vs.add(e)
	if inner == "cluster" || inner == "user" {
		own[e] = entryRef{inner, name}
	}
}

// attribute says, in every violation about a cluster or a user, whether the chosen context uses
// that entry; one it does not use is fixed by leaving it behind, which ql3 kubeconfig extract does.
func attribute(own owners, cfg *clientcmdapi.Config, name string) {
	ctx := cfg.Contexts[name]
	if ctx == nil {
		return
	}
	for e, ref := range own {
		used := ref.inner == "cluster" && ref.name == ctx.Cluster || ref.inner == "user" && ref.name == ctx.AuthInfo
		if used {
			e.Msg += " (context " + refuse.Ident(name) + " uses it)"
			continue
		}
		e.Msg += " (context " + refuse.Ident(name) + " does not use it)"
		e.Hint = ExtractHint(name)
	}
}

// ExtractHint is the advice on a violation in an entry the chosen context does not use.
func ExtractHint(context string) string {
	return "ql3 kubeconfig extract --context " + refuse.Ident(context) + " writes a kubeconfig of only what that context uses; see " + RecipeRef
}

func (r reported) mark(inner, name string, code refuse.Code) {
	k := inner + "/" + name
	if r[k] == nil {
		r[k] = map[refuse.Code]bool{}
	}
	r[k][code] = true
}

// checkTree inspects every entry of the three named lists. It also refuses repeated names
// itself, because clientcmd's own duplicate-name error prints the whole list, credentials
// included. The keys of one entry are visited in sorted order, so the list of violations (and
// Check's first one) does not depend on map iteration.
func (vs *violations) checkTree(tree map[string]any, own owners) reported {
	seen := reported{}
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
			vs.add(refuse.New(CodeInvalid, "kubeconfig field %s is not a list", l.key))
			continue
		}
		names := map[string]bool{}
		for i, it := range items {
			entry, ok := it.(map[string]any)
			if !ok {
				vs.add(refuse.New(CodeInvalid, "kubeconfig field %s[%d] is not a mapping", l.key, i))
				continue
			}
			name, _ := entry["name"].(string)
			if names[name] {
				vs.add(refuse.New(CodeContextAmbiguous, "kubeconfig field %s names %q more than once", l.key, name))
			}
			names[name] = true
			body, ok := entry[l.inner]
			if !ok || body == nil {
				continue
			}
			m, ok := body.(map[string]any)
			if !ok {
				vs.add(refuse.New(CodeInvalid, "kubeconfig field %s[%d].%s is not a mapping", l.key, i, l.inner))
				continue
			}
			keys := make([]string, 0, len(m))
			for k := range m {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				if code, bad := l.forbidden[strings.ToLower(k)]; bad {
					vs.addEntry(own, l.inner, name, refuse.New(code, "kubeconfig %s %q sets %s, which ql3 forbids", l.inner, name, k))
					seen.mark(l.inner, name, code)
				}
			}
		}
	}
	return seen
}

// checkParsed repeats the policy on kubectl's own reading, so a spelling the tree walk missed
// but the decoder accepts is still refused. Entries are visited in name order.
func (vs *violations) checkParsed(cfg *clientcmdapi.Config, seen reported, own owners) {
	add := func(inner, name string, code refuse.Code, format string) {
		if !seen[inner+"/"+name][code] {
			vs.addEntry(own, inner, name, refuse.New(code, format, name))
			seen.mark(inner, name, code)
		}
	}
	for _, name := range sortedKeys(cfg.AuthInfos) {
		a := cfg.AuthInfos[name]
		if a == nil {
			continue
		}
		if a.Exec != nil {
			add("user", name, CodeExecForbidden, "kubeconfig user %q sets exec, which ql3 forbids")
		}
		if a.AuthProvider != nil {
			add("user", name, CodeAuthProviderForbidden, "kubeconfig user %q sets auth-provider, which ql3 forbids")
		}
		if a.TokenFile != "" || a.ClientCertificate != "" || a.ClientKey != "" {
			add("user", name, CodeFileReference, "kubeconfig user %q references a file, which ql3 forbids")
		}
		if a.Impersonate != "" || a.ImpersonateUID != "" || len(a.ImpersonateGroups) > 0 || len(a.ImpersonateUserExtra) > 0 {
			add("user", name, CodeImpersonation, "kubeconfig user %q impersonates, which ql3 forbids")
		}
	}
	for _, name := range sortedKeys(cfg.Clusters) {
		c := cfg.Clusters[name]
		if c == nil {
			continue
		}
		if c.CertificateAuthority != "" {
			add("cluster", name, CodeFileReference, "kubeconfig cluster %q references a file, which ql3 forbids")
		}
		if c.InsecureSkipTLSVerify {
			add("cluster", name, CodeInsecure, "kubeconfig cluster %q sets insecure-skip-tls-verify, which ql3 forbids")
		}
		if c.ProxyURL != "" {
			add("cluster", name, CodeProxy, "kubeconfig cluster %q sets proxy-url, which ql3 forbids")
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
