package ceremony

import (
	"encoding/json"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/evidence/command"
	"github.com/qinglong/ql3/internal/stablefile"
	"github.com/qinglong/ql3/refuse"
)

// CodeApplyCommandWrite: the apply command file could not be written (exists, or bad directory).
const CodeApplyCommandWrite refuse.Code = "APPLY_COMMAND_WRITE_FAILED"

// applyCommandRole names the apply command file in messages.
const applyCommandRole = "apply command"

// CheckApplyCommandPath refuses, before any network step, an apply command path that
// WriteApplyCommand could not create (stablefile.CheckCreatable).
func CheckApplyCommandPath(path string) error {
	if err := stablefile.CheckCreatable(applyCommandRole, path); err != nil {
		return refuse.Wrap(CodeApplyCommandWrite, err, "--write-apply-command")
	}
	return nil
}

// WriteApplyCommand writes the apply command file: the preflight command with command changed and
// preflight added, 0600, never replacing an existing file, in a private directory, staged and
// committed so that a crash leaves no half-written file (stablefile.Create).
func WriteApplyCommand(path string, pc *command.Parsed, pre digest.Digest) error {
	c := pc.Command
	c.Command = evidence.CommandApply
	c.Preflight = &pre
	b, err := json.MarshalIndent(&c, "", "  ")
	if err != nil {
		return refuse.Wrap(CodeApplyCommandWrite, err, "encode apply command")
	}
	if err := stablefile.Create(applyCommandRole, path, append(b, '\n')); err != nil {
		return refuse.Wrap(CodeApplyCommandWrite, err, "--write-apply-command")
	}
	return nil
}
