package main

import (
	"context"
	"io"

	"github.com/opencontainers/go-digest"
	"github.com/spf13/cobra"

	"github.com/qinglong/ql3/attest"
	"github.com/qinglong/ql3/audit"
	"github.com/qinglong/ql3/internal/buildinfo"
	"github.com/qinglong/ql3/store"
)

// attestOptions: `ql3 attest --key KEY DIGEST`.
type attestOptions struct {
	root    *RootOptions
	keyPath string
	subject digestRef
	logKey  logKeyFlag
}

func newAttestCmd(root *RootOptions) *cobra.Command {
	o := &attestOptions{root: root}
	c := readsStore(&cobra.Command{
		Use:   "attest --store DIR --key KEY DIGEST",
		Short: "Audit a receipt, preflight or live-audit report, then sign an in-toto statement of its facts (Sigstore bundle)",
		Long: "Audits the record offline first and refuses to sign one that fails. Then stores an in-toto\n" +
			"Statement v1 about it (subject: the record's SHA-256; predicate: the facts an auditor filters on,\n" +
			"read from the record) as a canonical record, signs exactly those bytes in a DSSE envelope inside a\n" +
			"Sigstore bundle v0.3, stores the bundle and indexes it under the record. The key is a private\n" +
			"stable input (0600, in a 0700 directory of yours): PKCS#8 PEM, ECDSA P-256 or Ed25519. No private\n" +
			"key byte is stored or printed; the bundle carries the public key's hint only. See\n" +
			"docs/attestations.md for the cosign command that verifies the bundle outside ql3.",
		Example: "  ql3 attest --store /abs/evidence --key /abs/private/signing-key.pem sha256:5f0c...\n" +
			"  ql3 audit --store /abs/evidence --key /abs/keys/signing-key.pub sha256:5f0c...",
		Args: cobra.ExactArgs(1),
		RunE: runE(o),
	})
	pathVar(c.Flags(), &o.keyPath, "key", "the signing key (PKCS#8 PEM, private stable input)")
	o.logKey.register(c)
	return c
}

func (o *attestOptions) complete(_ *cobra.Command, a []string) error {
	var err error
	o.subject, err = digestRefArg("DIGEST", a[0])
	return err
}

func (o *attestOptions) validate() error {
	return requireFlags([2]string{"--key", o.keyPath})
}

func (o *attestOptions) run(_ context.Context, s streams) error {
	key, err := attest.LoadSigningKey(o.keyPath)
	if err != nil {
		return err
	}
	if o.root.Store != "" {
		if err := o.logKey.prepare(o.root.Store); err != nil {
			return err
		}
	}
	st, err := o.root.OpenStore()
	if err != nil {
		return err
	}
	defer st.Close()
	subject, err := o.subject.resolve(st)
	if err != nil {
		return err
	}
	a, err := auditAndAttest(st, subject, key)
	if err != nil {
		return err
	}
	if o.logKey.signer != nil {
		if err := signLogAfter(st, o.logKey.signer, s.err); err != nil {
			return err
		}
	}
	return o.root.printResult(s.out, attestResult{true, a}, nil)
}

// attestResult: the attestation stored.
type attestResult struct {
	OK bool `json:"ok"`
	*attest.Attestation
}

func (r attestResult) writeText(w io.Writer) error {
	return lines(w, "bundle "+string(r.Bundle.Digest), "statement "+string(r.Statement.Digest), "key "+string(r.KeyDigest))
}

// auditAndAttest signs only what the offline audit passes: an attestation states facts, it does
// not judge them.
func auditAndAttest(st *store.Store, subject digest.Digest, key *attest.SigningKey) (*attest.Attestation, error) {
	rep, err := audit.Audit(st, subject)
	if err != nil {
		return nil, err
	}
	if err := rep.Err(); err != nil {
		return nil, err
	}
	return attest.Attest(st, subject, key, attest.Options{QL3Version: buildinfo.Read().String()})
}
