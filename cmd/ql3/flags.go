package main

import (
	"path/filepath"
	"strings"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
)

// Argument codes: each is a usage error (exit status 2), raised before anything is read.
const (
	// CodeFlagRequired: a required flag (or its environment variable) is missing. The one code for it.
	CodeFlagRequired refuse.Code = "FLAG_REQUIRED"
	// CodePathNotAbsolute: a flag that must name an absolute, clean path names another.
	CodePathNotAbsolute refuse.Code = "PATH_NOT_ABSOLUTE"
	// CodeFlagNotApplicable: a flag was given that the command (or its command file) does not take,
	// or that contradicts the command file (a --store other than the file's store).
	CodeFlagNotApplicable refuse.Code = "FLAG_NOT_APPLICABLE"
)

// missingFlags is the refusal for required flags that were not given.
func missingFlags(names ...string) error {
	return refuse.NewUsage(CodeFlagRequired, "missing required %s", strings.Join(names, ", "))
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

// checkAbsolute refuses a path that is not absolute and clean: ql3 never resolves a path it is
// going to check against a working directory it did not choose.
func checkAbsolute(name, p string) error {
	if !filepath.IsAbs(p) || filepath.Clean(p) != p {
		return refuse.NewUsage(CodePathNotAbsolute, "%s %s is not an absolute clean path", name, refuse.Ident(p)).
			WithHint("give the absolute path, e.g. %s", suggestAbs(p))
	}
	return nil
}

func suggestAbs(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return "/abs/path"
}

// digestArg parses a digest given on the command line; a malformed one is a usage error with
// the digest parser's own code.
func digestArg(name, s string) (digest.Digest, error) {
	d, err := evidence.ParseDigest(s)
	if err != nil {
		if r, ok := refuse.As(err); ok {
			return "", &refuse.Error{Code: r.Code, Class: refuse.Usage, Msg: name + " " + refuse.Ident(s) + " is not a sha256 digest",
				Hint: "a digest is sha256: followed by 64 lower-case hex digits"}
		}
		return "", err
	}
	return d, nil
}
