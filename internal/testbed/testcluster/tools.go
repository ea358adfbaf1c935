package testcluster

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/opencontainers/go-digest"
)

// KubectlToolsEnv names a second tools directory whose kubectl replaces the one of
// $QL3_K8S_TOOLS (kube-apiserver and etcd still come from there). `make matrix` sets it to run
// kubectl one minor older or newer than the API server, the skew Kubernetes supports.
const KubectlToolsEnv = "QL3_KUBECTL_TOOLS"

// manifest is the manifest.json scripts/build-k8s.sh writes beside bin/.
type manifest struct {
	KubernetesVersion string            `json:"kubernetesVersion"`
	EtcdVersion       string            `json:"etcdVersion"`
	Binaries          map[string]string `json:"binaries"`
}

func readManifest(dir string) (*manifest, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoTools, err)
	}
	var m manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("%w: manifest of %s: %w", ErrNoTools, dir, err)
	}
	return &m, nil
}

// verifiedKubectl returns the path of dir's kubectl and its digest, which must be the one dir's
// manifest records: a tools directory rebuilt or edited under a running matrix is refused.
func verifiedKubectl(dir string, m *manifest) (string, digest.Digest, error) {
	p := filepath.Join(dir, "bin", "kubectl")
	d, err := digest.Parse(m.Binaries["kubectl"])
	if err != nil {
		return "", "", fmt.Errorf("%w: kubectl digest of %s: %w", ErrNoTools, dir, err)
	}
	f, err := os.Open(p)
	if err != nil {
		return "", "", fmt.Errorf("%w: %w", ErrNoTools, err)
	}
	defer f.Close()
	got, err := digest.SHA256.FromReader(f)
	if err != nil || got != d {
		return "", "", fmt.Errorf("%w: kubectl digest mismatch in %s", ErrNoTools, dir)
	}
	return p, d, nil
}

// selectKubectl sets t's kubectl: from $QL3_KUBECTL_TOOLS when set, else from t.Dir.
func selectKubectl(t *Tools, own *manifest) error {
	dir, m := t.Dir, own
	if other := os.Getenv(KubectlToolsEnv); other != "" {
		var err error
		if m, err = readManifest(other); err != nil {
			return err
		}
		dir = other
	}
	p, d, err := verifiedKubectl(dir, m)
	if err != nil {
		return err
	}
	t.Kubectl, t.KubectlDigest, t.KubectlVersion = p, d, m.KubernetesVersion
	return nil
}
