package rundir

import (
	"bufio"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/qinglong/ql3/refuse"
)

const prefix = "ql3-kubectl-"

// kubeconfig stands for the credential a run directory holds.
const kubeconfig = "kubeconfig-credential-bytes"

// privateRoot is a fresh 0700 root of our own at its canonical path.
func privateRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "root")
	if err := os.Mkdir(root, 0o700); err != nil {
		t.Fatal(err)
	}
	return root
}

func wantCode(t *testing.T, err error, code refuse.Code) {
	t.Helper()
	if got := refuse.CodeOf(err); got != code {
		t.Fatalf("got %v (code %q), want %s", err, got, code)
	}
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return !errors.Is(err, fs.ErrNotExist)
}

// create makes a run directory in root the way kubectl's makeWorkdir does.
func create(t *testing.T, root string) *Dir {
	t.Helper()
	d, err := Create(root, prefix)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Mkdir("cache"); err != nil {
		t.Fatal(err)
	}
	if err := d.WriteFile("kubeconfig", []byte(kubeconfig)); err != nil {
		t.Fatal(err)
	}
	return d
}

func mode(t *testing.T, p string) (os.FileMode, uint32) {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode(), fi.Sys().(*syscall.Stat_t).Uid
}

// TestCreate: the directory, its subdirectory, its lock and its file have exactly the modes of
// the rules whatever the umask, are owned by us, and Remove leaves nothing.
func TestCreate(t *testing.T) {
	for _, tmpfile := range []bool{true, false} {
		t.Run(map[bool]string{true: "O_TMPFILE lock", false: "O_EXCL lock"}[tmpfile], func(t *testing.T) {
			useTmpfile = tmpfile
			defer func() { useTmpfile = true }()
			old := unix.Umask(0o777)
			defer unix.Umask(old)
			root := privateRoot(t)
			d := create(t, root)
			if filepath.Dir(d.Path) != root || !regexp.MustCompile(`^`+prefix+`[0-9]+$`).MatchString(filepath.Base(d.Path)) {
				t.Fatalf("run directory %s", d.Path)
			}
			uid := uint32(os.Geteuid())
			for _, v := range []struct {
				path string
				mode os.FileMode
			}{
				{d.Path, os.ModeDir | 0o700},
				{filepath.Join(d.Path, "cache"), os.ModeDir | 0o700},
				{filepath.Join(d.Path, LockName), 0o600},
				{filepath.Join(d.Path, "kubeconfig"), 0o600},
			} {
				if m, u := mode(t, v.path); m != v.mode || u != uid {
					t.Errorf("%s: mode %v uid %d, want %v uid %d", v.path, m, u, v.mode, uid)
				}
			}
			if b, err := os.ReadFile(filepath.Join(d.Path, "kubeconfig")); err != nil || string(b) != kubeconfig {
				t.Fatalf("kubeconfig copy: %q %v", b, err)
			}
			// O_EXCL|O_NOFOLLOW: neither an existing file nor a planted symlink is written through.
			target := filepath.Join(root, "target")
			if err := os.Symlink(target, filepath.Join(d.Path, "planted")); err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"kubeconfig", "planted"} {
				err := d.WriteFile(name, []byte("x"))
				wantCode(t, err, CodeCreate)
				if strings.Contains(err.Error(), kubeconfig) {
					t.Fatal("the refusal carries the file's bytes")
				}
			}
			if exists(target) {
				t.Fatal("WriteFile followed a symlink")
			}
			wantCode(t, d.Mkdir("cache"), CodeCreate)
			if err := d.Remove(); err != nil {
				t.Fatal(err)
			}
			if exists(d.Path) {
				t.Fatalf("%s still exists", d.Path)
			}
		})
	}
}

// TestRemoveRepairsModes: a subdirectory kubectl left without permissions is removed too.
func TestRemoveRepairsModes(t *testing.T) {
	d := create(t, privateRoot(t))
	sub := filepath.Join(d.Path, "cache", "deep", "er")
	if err := os.MkdirAll(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sub, "f"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", filepath.Join(d.Path, "cache", "link")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{sub, filepath.Dir(sub), d.Path} {
		if err := os.Chmod(p, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Remove(); err != nil {
		t.Fatal(err)
	}
	if exists(d.Path) || !exists("/etc/passwd") {
		t.Fatal("removal left the directory or followed the symlink")
	}
}

// TestHostileTmpdir: every root another user could change, or that is reached through a
// symlink, is refused with its code, and nothing is made in it.
func TestHostileTmpdir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown to another uid needs root")
	}
	base := privateRoot(t)
	mk := func(name string, perm os.FileMode) string {
		p := filepath.Join(base, name)
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, perm); err != nil {
			t.Fatal(err)
		}
		return p
	}
	link := func(name, target string) string {
		p := filepath.Join(base, name)
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	private := mk("private", 0o700)
	if err := os.Mkdir(filepath.Join(private, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	open := mk("open", 0o777)
	sticky := mk("sticky", 0o777|os.ModeSticky)
	other := mk("other", 0o700)
	if err := os.Chown(other, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	group := mk("group", 0o770)
	openParent := mk("openparent", 0o777)
	inOpen := filepath.Join(openParent, "tmp")
	if err := os.Mkdir(inOpen, 0o700); err != nil {
		t.Fatal(err)
	}
	otherParent := mk("otherparent", 0o755)
	inOther := filepath.Join(otherParent, "tmp")
	if err := os.Mkdir(inOther, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(otherParent, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	vectors := []struct {
		name string
		root string      // the TMPDIR
		code refuse.Code // "" when it is accepted
		msg  string      // in the message
	}{
		{"private 0700", private, "", ""},
		{"0777 with sticky bit", sticky, "", ""},
		{"unclean spelling", private + "/./", "", ""},
		{"symlink to a private dir", link("link", private), CodeTmpdirSymlink, "reached through a symlink"},
		{"symlink in a parent component", filepath.Join(link("plink", private), "sub"), CodeTmpdirSymlink, "reached through a symlink"},
		{"0777 without sticky bit", open, CodeTmpdirWritable, "has mode 0777: writable by group or others without the sticky bit"},
		{"symlink to a 0777 dir", link("openlink", open), CodeTmpdirSymlink, "reached through a symlink"},
		{"group-writable", group, CodeTmpdirWritable, "has mode 0770"},
		{"owned by uid 65534", other, CodeTmpdirOwner, "is owned by uid 65534, neither the current uid 0 nor root"},
		{"parent 0777 without sticky bit", inOpen, CodeTmpdirWritable, "its parent " + openParent + " has mode 0777"},
		{"parent owned by uid 65534", inOther, CodeTmpdirOwner, "its parent " + otherParent + " is owned by uid 65534"},
		{"missing", filepath.Join(base, "missing"), CodeTmpdirInvalid, "does not exist"},
		{"a file", file, CodeTmpdirInvalid, "not a directory"},
		{"empty", "", CodeTmpdirInvalid, "empty"},
	}
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			d, err := Create(v.root, prefix)
			if v.code == "" {
				if err != nil {
					t.Fatal(err)
				}
				if err := d.Remove(); err != nil {
					t.Fatal(err)
				}
				return
			}
			wantCode(t, err, v.code)
			if !strings.Contains(err.Error(), v.msg) {
				t.Fatalf("message %q does not say %q", err, v.msg)
			}
			if d != nil {
				t.Fatal("a refusal returned a directory")
			}
		})
	}
	for _, dir := range []string{open, sticky, other, group, inOpen, inOther, private} {
		if left, _ := filepath.Glob(filepath.Join(dir, prefix+"*")); len(left) != 0 {
			t.Fatalf("run directories made or left in %s: %v", dir, left)
		}
	}
}

// TestTmpdirFromEnvironment: the root kubectl uses is os.TempDir(), so $TMPDIR a symlink to a
// 0777 directory (the finding) is refused.
func TestTmpdirFromEnvironment(t *testing.T) {
	base := privateRoot(t)
	open := filepath.Join(base, "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(open, link); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", link)
	_, err := Create(os.TempDir(), prefix)
	wantCode(t, err, CodeTmpdirSymlink)
	t.Setenv("TMPDIR", open)
	_, err = Create(os.TempDir(), prefix)
	wantCode(t, err, CodeTmpdirWritable)
}

// helperEnv names the root in which the helper process holds a run directory.
const helperEnv = "QL3_RUNDIR_HELPER_ROOT"

// TestHelperHoldRunDir is not a test: run as a child (helperEnv set), it makes a run directory
// with a kubeconfig copy, prints its path and waits on stdin until it is killed, like a ql3
// waiting on kubectl.
func TestHelperHoldRunDir(t *testing.T) {
	root := os.Getenv(helperEnv)
	if root == "" {
		t.Skip("helper process only")
	}
	d := create(t, root)
	os.Stdout.WriteString(d.Path + "\n")
	_, _ = os.Stdin.Read(make([]byte, 1))
	os.Exit(3) // never reached unless the parent closes stdin: no cleanup either way
}

// holder is a child process holding a run directory.
type holder struct {
	cmd  *exec.Cmd
	path string
}

func startHolder(t *testing.T, root string) *holder {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHoldRunDir$")
	cmd.Env = append(os.Environ(), helperEnv+"="+root)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &holder{cmd: cmd}
	t.Cleanup(func() { _ = stdin.Close(); h.kill(t) })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("helper printed no run directory: %q %v", line, err)
	}
	h.path = strings.TrimSuffix(line, "\n")
	return h
}

// kill ends the holder with SIGKILL: no cleanup of its own runs.
func (h *holder) kill(t *testing.T) {
	if h.cmd.ProcessState != nil {
		return
	}
	if err := h.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = h.cmd.Wait()
}

// TestSweepRemovesKilledRun: a run killed with SIGKILL leaves its directory and kubeconfig copy
// behind; the next run removes it.
func TestSweepRemovesKilledRun(t *testing.T) {
	root := privateRoot(t)
	h := startHolder(t, root)
	h.kill(t)
	if b, err := os.ReadFile(filepath.Join(h.path, "kubeconfig")); err != nil || string(b) != kubeconfig {
		t.Fatalf("the killed run's kubeconfig copy: %q %v (the test needs it left behind)", b, err)
	}
	d := create(t, root)
	defer func() {
		if err := d.Remove(); err != nil {
			t.Error(err)
		}
	}()
	if exists(h.path) {
		t.Fatalf("the killed run's directory %s was not swept", h.path)
	}
	if !exists(filepath.Join(d.Path, "kubeconfig")) {
		t.Fatal("the new run's directory is missing")
	}
}

// TestSweepSparesLiveRun: the directory of a live run, in another process or in this one, is
// never touched; once its process is killed, it is swept.
func TestSweepSparesLiveRun(t *testing.T) {
	root := privateRoot(t)
	h := startHolder(t, root)
	live := create(t, root)
	d := create(t, root)
	for _, p := range []string{h.path, live.Path, d.Path} {
		if b, err := os.ReadFile(filepath.Join(p, "kubeconfig")); err != nil || string(b) != kubeconfig {
			t.Fatalf("live run directory %s: %q %v", p, b, err)
		}
	}
	for _, x := range []*Dir{live, d} {
		if err := x.Remove(); err != nil {
			t.Fatal(err)
		}
	}
	h.kill(t)
	d = create(t, root)
	if err := d.Remove(); err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(root, "*")); len(left) != 0 {
		t.Fatalf("left in the root: %v", left)
	}
}

// TestSweepLeavesOthersAlone: the sweep removes nothing that is not exactly a dead run
// directory of our own: not one without a lock file, not one of another uid, not a symlink to
// a dead-looking directory, not a name outside the pattern.
func TestSweepLeavesOthersAlone(t *testing.T) {
	root := privateRoot(t)
	outside := privateRoot(t)
	dead := func(dir string) string {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{LockName, "kubeconfig"} {
			if err := os.WriteFile(filepath.Join(dir, n), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	noLock := filepath.Join(root, prefix+"1")
	if err := os.Mkdir(noLock, 0o700); err != nil {
		t.Fatal(err)
	}
	target := dead(filepath.Join(outside, prefix+"2"))
	if err := os.Symlink(target, filepath.Join(root, prefix+"2")); err != nil {
		t.Fatal(err)
	}
	keep := []string{noLock, target, filepath.Join(root, prefix+"2"), dead(filepath.Join(root, prefix+"x3")), dead(filepath.Join(root, "other-4"))}
	if os.Geteuid() == 0 {
		foreign := dead(filepath.Join(root, prefix+"5"))
		if err := os.Chown(foreign, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		keep = append(keep, foreign)
	}
	gone := dead(filepath.Join(root, prefix+"6"))
	d := create(t, root)
	if err := d.Remove(); err != nil {
		t.Fatal(err)
	}
	for _, p := range keep {
		if !exists(p) {
			t.Errorf("the sweep removed %s", p)
		}
	}
	if !exists(filepath.Join(target, "kubeconfig")) {
		t.Error("the sweep followed a symlink")
	}
	if exists(gone) {
		t.Errorf("the sweep left the dead run directory %s", gone)
	}
}

// TestRemoveFailedIsSwept: a removal that fails is KUBECTL_CLEANUP_FAILED with a hint that a
// credential is left, the lock is released all the same, and the next run's sweep removes it.
func TestRemoveFailedIsSwept(t *testing.T) {
	root := privateRoot(t)
	d := create(t, root)
	unlinkat = func(dirfd int, name string, flags int) error {
		if name == "kubeconfig" {
			return unix.EIO
		}
		return unix.Unlinkat(dirfd, name, flags)
	}
	err := d.Remove()
	unlinkat = unix.Unlinkat
	wantCode(t, err, CodeCleanup)
	if r, _ := refuse.As(err); !strings.Contains(r.Hint, "kubeconfig") || !errors.Is(err, unix.EIO) {
		t.Fatalf("refusal %v, hint %q: want the cause and a hint naming the kubeconfig", err, r.Hint)
	}
	if !exists(filepath.Join(d.Path, "kubeconfig")) || !exists(filepath.Join(d.Path, LockName)) {
		t.Fatal("the failed removal should have left the copy and, last, the lock")
	}
	next := create(t, root)
	if exists(d.Path) {
		t.Fatalf("the sweep left %s", d.Path)
	}
	if err := next.Remove(); err != nil {
		t.Fatal(err)
	}
}

// TestDefaultRoot: without TMPDIR, run directories go to the memory filesystem when there is a
// safe one, and to /tmp otherwise; TMPDIR, when set, wins over both.
func TestDefaultRoot(t *testing.T) {
	realShm := shmRoot
	defer func() { shmRoot = realShm }()
	// rootOf makes a run directory in the default root and returns the directory it was made in.
	rootOf := func(t *testing.T) string {
		t.Helper()
		d, err := CreateDefault(prefix)
		if err != nil {
			t.Fatal(err)
		}
		root := filepath.Dir(d.Path)
		if err := d.Remove(); err != nil {
			t.Fatal(err)
		}
		if exists(d.Path) {
			t.Fatalf("%s left behind", d.Path)
		}
		return root
	}
	base := privateRoot(t)
	// A directory on a disk filesystem: the test's root, or else the package's own directory.
	disk := ""
	for _, p := range []string{base, "."} {
		var fs unix.Statfs_t
		if err := unix.Statfs(p, &fs); err == nil && fs.Type != unix.TMPFS_MAGIC && fs.Type != unix.RAMFS_MAGIC {
			if disk, err = filepath.Abs(p); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	open := filepath.Join(base, "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}

	t.Run("memory filesystem", func(t *testing.T) {
		var fs unix.Statfs_t
		if err := unix.Statfs(realShm, &fs); err != nil || (fs.Type != unix.TMPFS_MAGIC && fs.Type != unix.RAMFS_MAGIC) {
			skipOrFail(t, realShm+" is not a tmpfs on this machine")
		}
		t.Setenv("TMPDIR", "")
		shmRoot = realShm
		if got := rootOf(t); got != realShm {
			t.Fatalf("run directory made in %s, want %s", got, realShm)
		}
	})
	t.Run("TMPDIR wins", func(t *testing.T) {
		t.Setenv("TMPDIR", base)
		shmRoot = realShm
		if got := rootOf(t); got != base {
			t.Fatalf("run directory made in %s, want TMPDIR %s", got, base)
		}
	})
	// Each of these is no memory root to use: the run goes to /tmp, checked in its turn.
	for _, v := range []struct{ name, shm string }{
		{"missing", filepath.Join(base, "missing")},
		{"refused: 0777 without the sticky bit", open},
		{"refused: reached through a symlink", link(t, base, realShm)},
		{"a disk filesystem", disk},
	} {
		t.Run(v.name, func(t *testing.T) {
			if v.shm == "" {
				skipOrFail(t, "neither "+base+" nor the package's directory is on a disk filesystem")
			}
			t.Setenv("TMPDIR", "")
			shmRoot = v.shm
			if got := rootOf(t); got != "/tmp" {
				t.Fatalf("run directory made in %s, want /tmp", got)
			}
		})
	}
	// /tmp is checked when it is the fallback: a refused TMPDIR is refused, never replaced.
	t.Run("TMPDIR refused", func(t *testing.T) {
		t.Setenv("TMPDIR", open)
		shmRoot = realShm
		d, err := CreateDefault(prefix)
		wantCode(t, err, CodeTmpdirWritable)
		if d != nil {
			t.Fatal("a refusal returned a directory")
		}
	})
	if left, _ := filepath.Glob(filepath.Join(open, prefix+"*")); len(left) != 0 {
		t.Fatalf("run directories made in a refused root: %v", left)
	}
}

// link makes a symlink in dir to target and returns its path.
func link(t *testing.T, dir, target string) string {
	t.Helper()
	p := filepath.Join(dir, "link-"+filepath.Base(target))
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// skipOrFail skips a test that this machine cannot run, and fails it under CI=true.
func skipOrFail(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(why)
	}
	t.Skip(why)
}

// TestFullRoot: a root with no room left (a tmpfs of 64 KiB, filled) refuses the run with
// KUBECTL_WORKDIR_FAILED, says what is full and how to choose another root, and leaves nothing
// of the run directory behind. For every kind of filling: no pages left (the kubeconfig copy
// cannot be written) and no inodes left (the directory cannot be made).
func TestFullRoot(t *testing.T) {
	for _, v := range []struct {
		name, opts, cause string
	}{
		{"no space", "size=64k", "no space left on device"},
		{"no inodes", "nr_inodes=8", "no space left on device"},
	} {
		t.Run(v.name, func(t *testing.T) {
			mnt := filepath.Join(privateRoot(t), "mnt")
			if err := os.Mkdir(mnt, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, v.opts+",mode=0700"); err != nil {
				skipOrFail(t, "mounting a tmpfs needs root: "+err.Error())
			}
			t.Cleanup(func() { _ = unix.Unmount(mnt, unix.MNT_DETACH) })
			fill(t, mnt)
			d, err := Create(mnt, prefix)
			if err == nil {
				err = d.WriteFile("kubeconfig", []byte(kubeconfig))
				if rerr := d.Remove(); rerr != nil {
					t.Fatal(rerr)
				}
			}
			wantCode(t, err, CodeCreate)
			if !strings.Contains(err.Error(), v.cause) {
				t.Fatalf("message %q does not say %q", err, v.cause)
			}
			if e, _ := refuse.As(err); e == nil || !strings.Contains(e.Hint, "set TMPDIR") {
				t.Fatalf("refusal %v has no hint naming TMPDIR", err)
			}
			if left, _ := filepath.Glob(filepath.Join(mnt, prefix+"*")); len(left) != 0 {
				t.Fatalf("run directories left in a full root: %v", left)
			}
		})
	}
}

// fill uses up dir's filesystem: files of 4 KiB until there is no page or no inode left.
func fill(t *testing.T, dir string) {
	t.Helper()
	page := make([]byte, 4096)
	for i := 0; ; i++ {
		err := os.WriteFile(filepath.Join(dir, "fill-"+strconv.Itoa(i)), page, 0o600)
		if errors.Is(err, unix.ENOSPC) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if i > 1<<16 {
			t.Fatal("the filesystem never filled")
		}
	}
}
