package main

import (
	"fmt"
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
func shellQuote(s string) string { return refuse.ShellQuote(s) }

// Codes of a DIGEST argument given as a prefix.
const (
	// CodeDigestAmbiguous: a digest prefix matches more than one object of the store.
	CodeDigestAmbiguous refuse.Code = "DIGEST_PREFIX_AMBIGUOUS"
	// CodeDigestUnknown: a digest prefix matches no object of the store.
	CodeDigestUnknown refuse.Code = "DIGEST_PREFIX_UNKNOWN"
)

// minPrefix is the shortest digest prefix accepted: what history prints (history.Short).
const minPrefix = 12

// digestRef is a DIGEST argument: a full digest, or a prefix of at least minPrefix hex digits
// (with or without sha256:) that names an object once it is resolved against the store.
type digestRef struct {
	name   string        // the argument's name, for messages
	full   digest.Digest // the digest, when it was given in full
	prefix string        // the hex prefix otherwise
}

// digestRefArg parses a DIGEST argument that may be a prefix; anything else is a usage error.
func digestRefArg(name, s string) (digestRef, error) {
	if d, err := evidence.ParseDigest(s); err == nil {
		return digestRef{name: name, full: d}, nil
	}
	hex := strings.TrimPrefix(s, "sha256:")
	if len(hex) >= minPrefix && len(hex) < 64 && strings.Trim(hex, "0123456789abcdef") == "" {
		return digestRef{name: name, prefix: hex}, nil
	}
	return digestRef{}, refuse.New(refuse.CodeDigestArg, "%s %s is not a sha256 digest", name, refuse.Ident(s)).
		WithHint("give sha256: and 64 lower-case hex digits, or a unique prefix of at least %d of them (as ql3 history prints)", minPrefix)
}

// prefixSource is a store that can list its objects by digest prefix.
type prefixSource interface {
	WithPrefix(hexPrefix string) ([]digest.Digest, error)
}

// resolve is the digest r names in src: itself when given in full, else the one object whose
// digest starts with the prefix.
func (r digestRef) resolve(src prefixSource) (digest.Digest, error) {
	if r.full != "" {
		return r.full, nil
	}
	ds, err := src.WithPrefix(r.prefix)
	if err != nil {
		return "", err
	}
	switch len(ds) {
	case 0:
		return "", refuse.New(CodeDigestUnknown, "%s sha256:%s matches no object in the store", r.name, r.prefix)
	case 1:
		return ds[0], nil
	}
	names := make([]string, 0, len(ds))
	for i, d := range ds {
		if i == 10 {
			names = append(names, fmt.Sprintf("and %d more", len(ds)-i))
			break
		}
		names = append(names, string(d))
	}
	return "", refuse.New(CodeDigestAmbiguous, "%s sha256:%s matches %d objects: %s", r.name, r.prefix, len(ds), strings.Join(names, ", ")).
		WithHint("give more digits of the one you mean")
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
