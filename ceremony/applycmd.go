package ceremony

import (
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/opencontainers/go-digest"
	"golang.org/x/sys/unix"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/refuse"
)

// CodeApplyCommandWrite: the apply command file could not be written (exists, or bad directory).
const CodeApplyCommandWrite refuse.Code = "APPLY_COMMAND_WRITE_FAILED"

// WriteApplyCommand writes the apply command file: the preflight command with command changed and
// preflight added, 0600, never replacing an existing file, in a private directory.
func WriteApplyCommand(path string, pc *ParsedCommand, pre digest.Digest) error {
	if !filepath.IsAbs(path) || filepath.Clean(path) != path {
		return refuse.New(CodeApplyCommandWrite, "apply command path %s is not absolute and clean", path)
	}
	c := pc.Command
	c.Command = evidence.CommandApply
	c.Preflight = &pre
	b, err := json.MarshalIndent(&c, "", "  ")
	if err != nil {
		return refuse.Wrap(CodeApplyCommandWrite, err, "encode apply command")
	}
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return refuse.Wrap(CodeApplyCommandWrite, err, "create apply command %s", path)
	}
	f := os.NewFile(uintptr(fd), path)
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return refuse.Wrap(CodeApplyCommandWrite, err, "chmod apply command %s", path)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return refuse.Wrap(CodeApplyCommandWrite, err, "write apply command %s", path)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return refuse.Wrap(CodeApplyCommandWrite, err, "sync apply command %s", path)
	}
	if err := f.Close(); err != nil {
		return refuse.Wrap(CodeApplyCommandWrite, err, "close apply command %s", path)
	}
	return nil
}
