package main

import (
	"path/filepath"
	"strings"

	"github.com/opencontainers/go-digest"
	"github.com/spf13/pflag"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
)

// missingFlags is the refusal for required flags that were not given.
func missingFlags(names ...string) error {
	return refuse.New(CodeFlagRequired, "missing required %s", strings.Join(names, ", "))
}

// requireFlags refuses the named flags whose values are empty, all at once.
func requireFlags(flags ...[2]string) error {
	var missing []string
	for _, f := range flags {
		if f[1] == "" {
			missing = append(missing, f[0])
		}
	}
	if len(missing) > 0 {
		return missingFlags(missing...)
	}
	return nil
}

// The one path rule of the command line (docs/cli.md): every path a flag, an argument or
// QL3_STORE names may be relative; it is made absolute against the working directory and cleaned
// once, as the command line is parsed, and from then on ql3 holds, checks, records and prints only
// the absolute path. "-" (stdin) is not a path.

// absPath is p made absolute and clean.
func absPath(name, p string) (string, error) {
	if p == "" || p == "-" {
		return p, nil
	}
	a, err := filepath.Abs(p)
	if err != nil {
		return "", refuse.Wrap(refuse.CodePathUnresolvable, err, "%s %s cannot be made absolute", name, refuse.Ident(p))
	}
	return a, nil
}

// pathValue is a flag whose value is a path, resolved by absPath when the flag is set.
type pathValue struct {
	name string
	p    *string
}

func (v pathValue) String() string { return *v.p }
func (v pathValue) Type() string   { return "path" }
func (v pathValue) Set(s string) error {
	a, err := absPath("--"+v.name, s)
	if err != nil {
		return err
	}
	*v.p = a
	return nil
}

// pathVar defines a path flag.
func pathVar(fs *pflag.FlagSet, p *string, name, usage string) {
	fs.Var(pathValue{name, p}, name, usage)
}

// shellQuote quotes s for a POSIX shell when it needs it, so that a printed command runs as shown.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=@,+%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// digestArg parses a full digest given on the command line; a malformed one is a usage error.
func digestArg(name, s string) (digest.Digest, error) {
	d, err := evidence.ParseDigest(s)
	if err != nil {
		return "", refuse.New(refuse.CodeDigestArg, "%s %s is not a sha256 digest", name, refuse.Ident(s)).
			WithHint("a digest is sha256: followed by 64 lower-case hex digits")
	}
	return d, nil
}
