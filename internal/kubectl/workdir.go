package kubectl

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/qinglong/ql3/internal/refuse"
)

const (
	// CodeWorkdir: the private per-run directory or the kubeconfig copy in it could not be made.
	CodeWorkdir refuse.Code = "KUBECTL_WORKDIR_FAILED"
	// CodeCleanup: the per-run directory (which holds a copy of the kubeconfig) could not be removed.
	CodeCleanup refuse.Code = "KUBECTL_CLEANUP_FAILED"
)

// Test hooks: tempRoot is where per-run directories are made ("" is os.TempDir()); removeAll
// removes one.
var (
	tempRoot  = ""
	removeAll = os.RemoveAll
)

// makeWorkdir creates the private per-run directory with its kubeconfig copy and the three
// subdirectories kubectl may write to. On error nothing is left behind.
func makeWorkdir(kubeconfig []byte) (dir string, err error) {
	root := tempRoot
	if root == "" {
		root = os.TempDir()
	}
	if root, err = filepath.Abs(root); err != nil {
		return "", refuse.Wrap(CodeWorkdir, err, "temporary directory root")
	}
	// MkdirTemp makes the directory with mode 0700 under a name nobody else can have created.
	if dir, err = os.MkdirTemp(root, dirPrefix+"*"); err != nil {
		return "", refuse.Wrap(CodeWorkdir, err, "create run directory under %s", root)
	}
	defer func() {
		if err != nil {
			if cerr := removeWorkdir(dir); cerr != nil {
				err = errors.Join(err, cerr)
			}
		}
	}()
	// A umask can only have removed bits; the mode must be exactly 0700, whatever it is.
	if err = os.Chmod(dir, 0o700); err != nil {
		return "", refuse.Wrap(CodeWorkdir, err, "chmod run directory %s", dir)
	}
	if err = checkPrivateDir(dir); err != nil {
		return "", err
	}
	for _, sub := range []string{cacheName, configName, tmpName} {
		p := filepath.Join(dir, sub)
		if err = os.Mkdir(p, 0o700); err == nil {
			err = os.Chmod(p, 0o700)
		}
		if err != nil {
			return "", refuse.Wrap(CodeWorkdir, err, "create %s", p)
		}
	}
	if err = writeKubeconfig(filepath.Join(dir, kubeconfigName), kubeconfig); err != nil {
		return "", err
	}
	return dir, nil
}

// checkPrivateDir confirms that dir is a real directory of ours with mode 0700.
func checkPrivateDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return refuse.Wrap(CodeWorkdir, err, "stat run directory %s", dir)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || fi.Mode().Perm() != 0o700 || int(st.Uid) != os.Geteuid() {
		return refuse.New(CodeWorkdir, "run directory %s is not a 0700 directory owned by uid %d", dir, os.Geteuid())
	}
	return nil
}

// writeKubeconfig writes the private copy: O_EXCL so that it is a new file of ours, 0600 whatever
// the umask, and its length checked. The bytes are a credential: no error carries them.
func writeKubeconfig(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return refuse.Wrap(CodeWorkdir, err, "create kubeconfig copy")
	}
	n, err := f.Write(b)
	if err == nil && n != len(b) {
		err = fmt.Errorf("kubectl: short write of %d of %d bytes", n, len(b))
	}
	if err == nil {
		err = f.Chmod(0o600)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return refuse.Wrap(CodeWorkdir, err, "write kubeconfig copy (%d bytes)", len(b))
	}
	return nil
}

// removeWorkdir removes the per-run directory and confirms that it is gone. kubectl could have
// left a subdirectory without write permission; such modes are repaired and the removal retried.
func removeWorkdir(dir string) error {
	err := removeAll(dir)
	if err != nil {
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, werr error) error {
			if werr == nil && d.IsDir() {
				_ = os.Chmod(p, 0o700)
			}
			return nil
		})
		err = removeAll(dir)
	}
	if err == nil {
		if _, serr := os.Lstat(dir); !errors.Is(serr, fs.ErrNotExist) {
			err = fmt.Errorf("kubectl: %s still exists after removal", dir)
		}
	}
	if err != nil {
		return refuse.Wrap(CodeCleanup, err, "remove run directory %s", dir).
			WithHint("it holds a copy of the kubeconfig: remove it by hand")
	}
	return nil
}
