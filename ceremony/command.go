package ceremony

import "github.com/qinglong/ql3/evidence/command"

// ParsedCommand is a validated command file; parsing lives in the leaf package evidence/command,
// which the offline auditor shares.
type ParsedCommand = command.Parsed

// ParseCommand validates raw command file bytes (command.Parse).
func ParseCommand(raw []byte) (*ParsedCommand, error) { return command.Parse(raw) }

// MaxCommandFile is the byte ceiling of a command file.
const MaxCommandFile = command.MaxFile
