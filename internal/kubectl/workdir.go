package kubectl

import (
	"errors"

	"github.com/qinglong/ql3/internal/kubectl/rundir"
	"github.com/qinglong/ql3/verdict/argv"
)

// The run directory's codes are raised by internal/kubectl/rundir.
const (
	// CodeWorkdir: the private per-run directory or the kubeconfig copy in it could not be made.
	CodeWorkdir = rundir.CodeCreate
	// CodeCleanup: the per-run directory (which holds a copy of the kubeconfig) could not be removed.
	CodeCleanup = rundir.CodeCleanup
)

// Test hooks: tempRoot is where per-run directories are made ("" is rundir's default root:
// $TMPDIR when set, else /dev/shm when it is a tmpfs, else /tmp); removeDir
// removes one.
var (
	tempRoot  = ""
	removeDir = (*rundir.Dir).Remove
)

// makeWorkdir creates the private per-run directory (rundir.Create: the root checked and held,
// leftovers of killed runs swept, the directory locked) with its kubeconfig copy, the two
// subdirectories kubectl may write to, and its cache path, all relative to the held descriptors.
// On error nothing is left behind.
//
// The cache path (--cache-dir, KUBECACHEDIR, XDG_CACHE_HOME) is an empty regular file, not a
// directory: no one, root included, can make a directory beneath a file (ENOTDIR), so kubectl
// keeps no discovery or HTTP cache at all. kubectl treats a cache it cannot write as a miss and
// says nothing (measured on every supported minor). A fresh directory would hold a cache of this
// run only, which no later run could read anyway; kubectl wrote about 75 files (1.9 MB, mostly
// OpenAPI documents) into it per run, and removing them was half of ql3's own CPU in an apply.
func makeWorkdir(kubeconfig []byte) (*rundir.Dir, error) {
	var d *rundir.Dir
	var err error
	if tempRoot != "" {
		d, err = rundir.Create(tempRoot, argv.DirPrefix)
	} else {
		d, err = rundir.CreateDefault(argv.DirPrefix)
	}
	if err != nil {
		return nil, err
	}
	for _, sub := range []string{argv.ConfigName, argv.TmpName} {
		if err = d.Mkdir(sub); err != nil {
			break
		}
	}
	if err == nil {
		err = d.WriteFile(argv.CacheName, nil)
	}
	if err == nil {
		err = d.WriteFile(argv.KubeconfigName, kubeconfig)
	}
	if err != nil {
		if cerr := removeDir(d); cerr != nil {
			err = errors.Join(err, cerr)
		}
		return nil, err
	}
	return d, nil
}
