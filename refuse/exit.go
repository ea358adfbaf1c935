package refuse

// The command line's own codes: each says that the command line itself is wrong, so each is raised
// before anything is read, opened or run. They are the only codes that exit 2.
const (
	// CodeUsage: an unknown command, subcommand, flag or help topic, a wrong argument count, a flag
	// value the flag parser rejects, or an --output that is neither text nor json.
	CodeUsage Code = "USAGE"
	// CodeFlagRequired: a required flag (or its environment variable) is missing. The one code for it.
	CodeFlagRequired Code = "FLAG_REQUIRED"
	// CodeFlagNotApplicable: a flag was given that the command (or its command file) does not take,
	// or that contradicts the command file (a --store other than the file's store).
	CodeFlagNotApplicable Code = "FLAG_NOT_APPLICABLE"
	// CodePathUnresolvable: a path on the command line cannot be made absolute against the working
	// directory.
	CodePathUnresolvable Code = "PATH_UNRESOLVABLE"
	// CodeDigestArg: a DIGEST argument is neither a sha256 digest nor a prefix of at least 12 hex
	// digits of one.
	CodeDigestArg Code = "DIGEST_ARG_INVALID"
)

// Exit statuses of ql3.
const (
	ExitOK      = 0 // success
	ExitRefused = 1 // a check failed closed
	ExitUsage   = 2 // the command line is wrong
)

// exitStatus is the one table of exit statuses: a code it does not name exits ExitRefused. The
// exit status belongs to the code, never to the place that raised it, so the same refusal exits
// the same way from every command. docs/reason-codes.md shows it as its exit column, and the test
// that regenerates that page keeps the two in step.
var exitStatus = map[Code]int{
	CodeUsage:             ExitUsage,
	CodeFlagRequired:      ExitUsage,
	CodeFlagNotApplicable: ExitUsage,
	CodePathUnresolvable:  ExitUsage,
	CodeDigestArg:         ExitUsage,
}

// ExitStatus is the exit status of a refusal with code c.
func ExitStatus(c Code) int {
	if s, ok := exitStatus[c]; ok {
		return s
	}
	return ExitRefused
}
