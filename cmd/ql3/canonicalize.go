package main

import (
	"context"
	"io"

	"github.com/opencontainers/go-digest"
	"github.com/spf13/cobra"

	"github.com/qinglong/ql3/evidence"
)

// canonicalizeOptions: `ql3 canonicalize [FILE|-]`.
type canonicalizeOptions struct {
	root *RootOptions
	name string
}

func newCanonicalizeCmd(root *RootOptions) *cobra.Command {
	o := &canonicalizeOptions{root: root}
	return &cobra.Command{
		Use:     "canonicalize [FILE|-]",
		Short:   "Print the RFC 8785 canonical form of a JSON document",
		Example: "  ql3 canonicalize record.json\n  echo '{\"b\":1,\"a\":2}' | ql3 canonicalize -o json",
		Args:    cobra.MaximumNArgs(1),
		RunE:    runE(o),
	}
}

func (o *canonicalizeOptions) complete(_ *cobra.Command, a []string) error {
	o.name = "-"
	if len(a) == 1 {
		o.name = a[0]
	}
	var err error
	o.name, err = absPath("FILE", o.name)
	return err
}

func (o *canonicalizeOptions) validate() error { return nil }

func (o *canonicalizeOptions) run(_ context.Context, s streams) error {
	b, err := readInput(o.name)
	if err != nil {
		return err
	}
	c, err := evidence.Canonicalize(b)
	if err != nil {
		return err
	}
	return o.root.printResult(s.out, canonicalResult{true, string(c), evidence.FromBytes(c)}, nil)
}

// canonicalResult: the canonical form; its text is the canonical bytes.
type canonicalResult struct {
	OK        bool          `json:"ok"`
	Canonical string        `json:"canonical"`
	Digest    digest.Digest `json:"digest"`
}

func (r canonicalResult) writeText(w io.Writer) error { return lines(w, r.Canonical) }
