package ceremony_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qinglong/ql3/ceremony"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/evidence/command"
	"github.com/qinglong/ql3/evidence/lock"
	"github.com/qinglong/ql3/internal/kubeconfig"
	"github.com/qinglong/ql3/internal/stablefile"
	"github.com/qinglong/ql3/internal/testbed/testcluster"
	"github.com/qinglong/ql3/refuse"
)

// Anchors in the kubeconfig internal/testbed/testcluster renders; each edit inserts lines after one.
const (
	kcUsers     = "users:\n"
	kcAdminUser = "- name: ql3-admin\n  user:\n"
	kcTokenUser = "- name: ql3-token\n  user:\n"
	kcCluster   = "  cluster:\n"
)

// insertAfter inserts text after the first occurrence of anchor, which must be present.
func insertAfter(t testing.TB, s, anchor, text string) string {
	t.Helper()
	i := strings.Index(s, anchor)
	if i < 0 {
		t.Fatalf("anchor %q not in the kubeconfig", anchor)
	}
	return s[:i+len(anchor)] + text + s[i+len(anchor):]
}

// TestCeremonyRefusesKubeconfig: each kubeconfig is rewritten in the bed and its digest re-pinned,
// so that only the policy (docs/rationale.md#5-kubeconfig-policy) can refuse it; the refusal comes before any kubectl run.
func TestCeremonyRefusesKubeconfig(t *testing.T) {
	testcluster.Need(t)
	vectors := []struct {
		name    string
		edit    func(t testing.TB, kc string) string // rewrites the kubeconfig
		context string                               // the context the command names; "" keeps the bed's
		code    refuse.Code
	}{
		// An exec plugin on a user the context does not even select: refused anywhere in the file.
		{"exec on an unused user", func(t testing.TB, kc string) string {
			return insertAfter(t, kc, kcUsers, "- name: helper\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/true\n      interactiveMode: Never\n")
		}, "", kubeconfig.CodeExecForbidden},
		// An exec plugin beside the selected user's inline certificate.
		{"exec on the selected user", func(t testing.TB, kc string) string {
			return insertAfter(t, kc, kcAdminUser, "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/true\n      interactiveMode: Never\n")
		}, "", kubeconfig.CodeExecForbidden},
		// An auth-provider plugin.
		{"auth-provider", func(t testing.TB, kc string) string {
			return insertAfter(t, kc, kcAdminUser, "    auth-provider:\n      name: oidc\n      config: {}\n")
		}, "", kubeconfig.CodeAuthProviderForbidden},
		// A token read from a file behind ql3's back, on the token user.
		{"tokenFile", func(t testing.TB, kc string) string {
			return insertAfter(t, kc, kcTokenUser, "    tokenFile: /dev/null\n")
		}, cluster.TokenContext, kubeconfig.CodeFileReference},
		// A client certificate read from a file.
		{"client-certificate file", func(t testing.TB, kc string) string {
			return insertAfter(t, kc, kcAdminUser, "    client-certificate: /etc/hostname\n")
		}, "", kubeconfig.CodeFileReference},
		// A client key read from a file.
		{"client-key file", func(t testing.TB, kc string) string {
			return insertAfter(t, kc, kcAdminUser, "    client-key: /etc/hostname\n")
		}, "", kubeconfig.CodeFileReference},
		// A CA read from a file.
		{"certificate-authority file", func(t testing.TB, kc string) string {
			return insertAfter(t, kc, kcCluster, "    certificate-authority: /etc/hostname\n")
		}, "", kubeconfig.CodeFileReference},
		// TLS verification switched off.
		{"insecure-skip-tls-verify true", func(t testing.TB, kc string) string {
			return insertAfter(t, kc, kcCluster, "    insecure-skip-tls-verify: true\n")
		}, "", kubeconfig.CodeInsecure},
		// Present but off today is one edit away from on: refused too.
		{"insecure-skip-tls-verify false", func(t testing.TB, kc string) string {
			return insertAfter(t, kc, kcCluster, "    insecure-skip-tls-verify: false\n")
		}, "", kubeconfig.CodeInsecure},
		// A proxy between kubectl and the API server.
		{"proxy-url", func(t testing.TB, kc string) string {
			return insertAfter(t, kc, kcCluster, "    proxy-url: http://127.0.0.1:9\n")
		}, "", kubeconfig.CodeProxy},
		// The command names a context the kubeconfig lacks.
		{"missing context", func(_ testing.TB, kc string) string { return kc }, "absent", kubeconfig.CodeContextMissing},
		// The selected context names a user the kubeconfig lacks.
		{"context names a missing user", func(t testing.TB, kc string) string {
			return replaceOnce(t, kc, "user: ql3-admin}", "user: nobody}")
		}, "", kubeconfig.CodeContextMissing},
		// Two contexts of one name: which one kubectl picks is not ours to guess.
		{"ambiguous context", func(_ testing.TB, kc string) string {
			return kc + "- name: " + cluster.Context + "\n  context: {cluster: ql3, user: ql3-token}\n"
		}, "", kubeconfig.CodeContextAmbiguous},
		// A repeated key: a second server the lenient reader would silently take.
		{"duplicate server key", func(t testing.TB, kc string) string {
			return insertAfter(t, kc, kcCluster, "    server: https://127.0.0.1:9\n")
		}, "", kubeconfig.CodeDuplicateKey},
		// A repeated top-level key.
		{"duplicate top-level key", func(_ testing.TB, kc string) string { return kc + "kind: Config\n" }, "", kubeconfig.CodeDuplicateKey},
	}
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			b := newBed(t, true, nil)
			b.repin("kubeconfig", []byte(v.edit(t, string(cluster.KubeconfigBytes()))))
			if v.context != "" {
				b.Set("kubeconfig", "context", v.context)
			}
			runs := 0
			defer ceremony.SetRunHook(func(string) { runs++ })()
			_, err := b.preflight()
			b.wantRefused(err, v.code, 0)
			if runs != 0 {
				t.Fatalf("%d kubectl runs before the kubeconfig refusal", runs)
			}
		})
	}
}

// TestCeremonyRefusesKubectl: one private copy of the real kubectl, changed per case and restored,
// so that only the executable checks (docs/rationale.md#4-private-inputs) can refuse it.
func TestCeremonyRefusesKubectl(t *testing.T) {
	testcluster.Need(t)
	exe := privateKubectl(t)
	dir := filepath.Dir(exe)
	good := string(cluster.KubectlDigest)
	chmod := func(mode os.FileMode) func(t *testing.T) (string, string, func()) {
		return func(t *testing.T) (string, string, func()) {
			if err := os.Chmod(exe, mode); err != nil {
				t.Fatal(err)
			}
			return exe, good, func() { _ = os.Chmod(exe, 0o755) }
		}
	}
	vectors := []struct {
		name string
		// setup returns the path and digest to pin, and undoes its change.
		setup func(t *testing.T) (path, digest string, undo func())
		code  refuse.Code
	}{
		// The pinned digest is another file's: a different kubectl than the one reviewed.
		{"digest mismatch", func(t *testing.T) (string, string, func()) {
			return exe, string(evidence.FromBytes([]byte("another kubectl"))), func() {}
		}, stablefile.CodeExecDigest},
		// Group-writable: anyone in the group could swap the bytes.
		{"group-writable", chmod(0o775), stablefile.CodeExecWritable},
		// Other-writable.
		{"other-writable", chmod(0o757), stablefile.CodeExecWritable},
		// Not executable by its owner.
		{"not executable", chmod(0o644), stablefile.CodeExecNotExecutable},
		// setuid: stricter than docs/rationale.md#4-private-inputs, refused as well.
		{"setuid", chmod(os.ModeSetuid | 0o755), stablefile.CodeExecSetID},
		// The pinned path is a symlink to the good copy.
		{"symlinked path", func(t *testing.T) (string, string, func()) {
			link := filepath.Join(dir, "kubectl-link")
			if err := os.Symlink(exe, link); err != nil {
				t.Fatal(err)
			}
			return link, good, func() { _ = os.Remove(link) }
		}, stablefile.CodeSymlink},
		// A parent directory of the pinned path is a symlink.
		{"symlinked parent directory", func(t *testing.T) (string, string, func()) {
			link := dir + "-link"
			if err := os.Symlink(dir, link); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(link, "kubectl"), good, func() { _ = os.Remove(link) }
		}, stablefile.CodeSymlink},
		// A second hard link (link count 2): another name could rewrite the same inode.
		{"hardlinked", func(t *testing.T) (string, string, func()) {
			other := filepath.Join(dir, "kubectl-hardlink")
			if err := os.Link(exe, other); err != nil {
				t.Fatal(err)
			}
			return exe, good, func() { _ = os.Remove(other) }
		}, stablefile.CodeExecLinkCount},
		// A directory where kubectl should be.
		{"directory", func(t *testing.T) (string, string, func()) { return dir, good, func() {} }, stablefile.CodeExecNotRegular},
		// Owned by a uid that is neither ours nor root (only root can set that up).
		{"foreign owner", func(t *testing.T) (string, string, func()) {
			if os.Getuid() != 0 {
				t.Skip("chown to a foreign uid needs root")
			}
			if err := os.Chown(exe, 4242, 4242); err != nil {
				t.Fatal(err)
			}
			return exe, good, func() { _ = os.Chown(exe, 0, 0) }
		}, stablefile.CodeExecOwner},
	}
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			b := newBed(t, true, nil)
			path, d, undo := v.setup(t)
			defer undo()
			b.Set("kubectl", "path", path)
			b.Set("kubectl", "digest", d)
			runs := 0
			defer ceremony.SetRunHook(func(string) { runs++ })()
			_, err := b.preflight()
			b.wantRefused(err, v.code, 0)
			if runs != 0 {
				t.Fatalf("%d kubectl runs before the executable refusal", runs)
			}
		})
	}
}

// TestCeremonyRefusesInputFiles: the private inputs (docs/rationale.md#4-private-inputs) pinned wrong, not private, or a
// lock the independent verifier refuses.
func TestCeremonyRefusesInputFiles(t *testing.T) {
	testcluster.Need(t)
	vectors := []struct {
		name string
		// prepare changes the bed; it returns the command file to run ("" writes the bed's command).
		prepare func(t *testing.T, b *bed) string
		code    refuse.Code
	}{
		// The manifest pinned with the lock report's digest.
		{"manifest digest pinned wrong", func(_ *testing.T, b *bed) string {
			b.Set("manifest", "digest", b.Field("lockReport", "digest"))
			return ""
		}, ceremony.CodeDigestMismatch},
		// The lock report pinned with the manifest's digest.
		{"lock report digest pinned wrong", func(_ *testing.T, b *bed) string {
			b.Set("lockReport", "digest", b.Field("manifest", "digest"))
			return ""
		}, ceremony.CodeDigestMismatch},
		// The kubeconfig pinned with the digest of another kubeconfig.
		{"kubeconfig digest pinned wrong", func(_ *testing.T, b *bed) string {
			b.Set("kubeconfig", "digest", string(evidence.FromBytes(append(cluster.KubeconfigBytes(), '\n'))))
			return ""
		}, ceremony.CodeDigestMismatch},
		// The manifest readable by everyone (0644).
		{"manifest mode 0644", func(t *testing.T, b *bed) string {
			chmod(t, b.Field("manifest", "path"), 0o644)
			return ""
		}, stablefile.CodeNotPrivate},
		// The kubeconfig readable by the group (0640).
		{"kubeconfig mode 0640", func(t *testing.T, b *bed) string {
			chmod(t, b.Field("kubeconfig", "path"), 0o640)
			return ""
		}, stablefile.CodeNotPrivate},
		// The lock report in a directory others can list (0755).
		{"lock report in a 0755 directory", func(t *testing.T, b *bed) string {
			pub := filepath.Join(b.Dir, "pub")
			if err := os.Mkdir(pub, 0o700); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(pub, "lock-report.json")
			if err := os.Rename(b.Field("lockReport", "path"), p); err != nil {
				t.Fatal(err)
			}
			chmod(t, pub, 0o755)
			b.Set("lockReport", "path", p)
			return ""
		}, stablefile.CodeNotPrivate},
		// The command file itself readable by everyone.
		{"command file mode 0644", func(t *testing.T, b *bed) string {
			f := b.WriteCommand("preflight.json", evidence.CommandPreflight, "")
			chmod(t, f, 0o644)
			return f
		}, stablefile.CodeNotPrivate},
		// The manifest path is a symlink to the real file.
		{"manifest symlinked", func(t *testing.T, b *bed) string {
			link := filepath.Join(b.Dir, "manifest-link.yaml")
			if err := os.Symlink(b.Field("manifest", "path"), link); err != nil {
				t.Fatal(err)
			}
			b.Set("manifest", "path", link)
			return ""
		}, stablefile.CodeSymlink},
		// The kubeconfig the command names does not exist.
		{"kubeconfig missing", func(t *testing.T, b *bed) string {
			b.Set("kubeconfig", "path", filepath.Join(b.Dir, "absent"))
			return ""
		}, stablefile.CodeNotFound},
		// A manifest with a second hard link.
		{"manifest hardlinked", func(t *testing.T, b *bed) string {
			if err := os.Link(b.Field("manifest", "path"), filepath.Join(b.Dir, "manifest-link")); err != nil {
				t.Fatal(err)
			}
			return ""
		}, stablefile.CodeLinkCount},
		// A manifest edited after it was locked and re-pinned: the lock report binds other bytes.
		{"manifest edited after locking", func(t *testing.T, b *bed) string {
			m, err := os.ReadFile(b.Field("manifest", "path"))
			if err != nil {
				t.Fatal(err)
			}
			b.repin("manifest", []byte(replaceOnce(t, string(m), "replicas: 0", "replicas: 9")))
			return ""
		}, lock.CodeManifestDigest},
		// A lock report edited and re-pinned: its self digest no longer holds.
		{"lock report edited", func(t *testing.T, b *bed) string {
			r, err := os.ReadFile(b.Field("lockReport", "path"))
			if err != nil {
				t.Fatal(err)
			}
			b.repin("lockReport", []byte(replaceOnce(t, string(r), `"version": "3.4.1"`, `"version": "3.4.2"`)))
			return ""
		}, lock.CodeSelfDigest},
		// An apply command given to the preflight subcommand.
		{"apply command to preflight", func(_ *testing.T, b *bed) string {
			return b.WriteCommand("apply.json", evidence.CommandApply, string(evidence.FromBytes([]byte("p"))))
		}, command.CodeCommandMismatch},
	}
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			b := newBed(t, true, nil)
			f := v.prepare(t, b)
			if f == "" {
				f = b.WriteCommand("preflight.json", evidence.CommandPreflight, "")
			}
			_, err := b.preflightFile(f)
			b.wantRefused(err, v.code, 0)
		})
	}
}

// replaceOnce replaces the first old in s, which must be present.
func replaceOnce(t testing.TB, s, old, new string) string {
	t.Helper()
	if !strings.Contains(s, old) {
		t.Fatalf("%q not found", old)
	}
	return strings.Replace(s, old, new, 1)
}

func chmod(t testing.TB, p string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}
