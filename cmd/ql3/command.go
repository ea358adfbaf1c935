package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/opencontainers/go-digest"
	"github.com/spf13/cobra"

	"github.com/qinglong/ql3/ceremony"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/evidence/command"
	"github.com/qinglong/ql3/internal/stablefile"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
)

func newCommandCmd(root *RootOptions) *cobra.Command {
	c := &cobra.Command{
		Use:   "command",
		Short: "Write command files",
		Example: "  ql3 command new --store /abs/evidence --manifest in/locked.yaml --lock-report in/lock-report.json \\\n" +
			"    --kubeconfig in/kubeconfig --context prod --kubectl /usr/local/bin/kubectl \\\n" +
			"    --cluster-uid 4fd9a2fb-bc12-4e5c-b216-d4abd4edb95d --out private/preflight.json",
		Args: cobra.NoArgs,
	}
	c.AddCommand(newCommandNewCmd(root))
	return c
}

// commandNewOptions: `ql3 command new`, which writes a preflight command file.
type commandNewOptions struct {
	root                                           *RootOptions
	manifest, lockReport, kubeconfig, kubectl, out string
	context, clusterUID                            string
	store                                          string
	fromReceipt                                    string // --from-receipt: a live-audit file instead
}

func newCommandNewCmd(root *RootOptions) *cobra.Command {
	o := &commandNewOptions{root: root}
	c := readsStore(&cobra.Command{
		Use:   "new --store DIR --manifest F --lock-report F --kubeconfig F --context NAME --kubectl F --cluster-uid UID --out PATH",
		Short: "Write a preflight command file: every digest computed, every offline check of a preflight run",
		Long: "Reads every input as a preflight does (private stable files, the lock report against the\n" +
			"manifest, the kubeconfig policy, the kubectl executable), computes their SHA-256 digests and\n" +
			"writes the preflight command file at --out: mode 0600, in a 0700 directory of yours, never\n" +
			"replacing a file, staged and committed so that a crash leaves no half-written file. An input a\n" +
			"preflight would refuse is refused with the same code. Relative paths are resolved against the\n" +
			"working directory; the file holds, and ql3 prints, absolute paths.\n\n" +
			"--cluster-uid is required and never filled in: it is the kube-system UID you reviewed with\n" +
			"ql3 cluster identity. Nothing contacts the cluster here.",
		Example: "  ql3 command new --store /abs/evidence --manifest in/locked.yaml --lock-report in/lock-report.json \\\n" +
			"    --kubeconfig in/kubeconfig --context prod --kubectl /usr/local/bin/kubectl \\\n" +
			"    --cluster-uid 4fd9a2fb-bc12-4e5c-b216-d4abd4edb95d --out private/preflight.json",
		Args: cobra.NoArgs,
		RunE: runE(o),
	})
	f := c.Flags()
	pathVar(f, &o.manifest, "manifest", "locked manifest (locked.yaml)")
	pathVar(f, &o.lockReport, "lock-report", "lock report (lock-report.json)")
	pathVar(f, &o.kubeconfig, "kubeconfig", "kubeconfig with inline credentials")
	f.StringVar(&o.context, "context", "", "kubeconfig context to use (explicit, required)")
	pathVar(f, &o.kubectl, "kubectl", "kubectl executable to pin")
	f.StringVar(&o.clusterUID, "cluster-uid", "", "the kube-system UID you reviewed (ql3 cluster identity)")
	pathVar(f, &o.out, "out", "where to write the command file (0600, never replaced)")
	f.StringVar(&o.fromReceipt, "from-receipt", "", "write the live-audit command file of this receipt instead (needs only --store and --out)")
	return c
}

func (o *commandNewOptions) complete(*cobra.Command, []string) error {
	o.store = o.root.Store
	return nil
}

func (o *commandNewOptions) validate() error {
	if o.fromReceipt != "" {
		if o.manifest != "" || o.lockReport != "" || o.kubeconfig != "" || o.context != "" || o.kubectl != "" || o.clusterUID != "" {
			return refuse.New(CodeFlagNotApplicable, "--from-receipt takes the target from the receipt: give only --store and --out")
		}
		if _, err := digestArg("--from-receipt", o.fromReceipt); err != nil {
			return err
		}
		return requireFlags([2]string{"--store", o.store}, [2]string{"--out", o.out})
	}
	if err := requireFlags([2]string{"--store", o.store}, [2]string{"--manifest", o.manifest},
		[2]string{"--lock-report", o.lockReport}, [2]string{"--kubeconfig", o.kubeconfig},
		[2]string{"--context", o.context}, [2]string{"--kubectl", o.kubectl},
		[2]string{"--cluster-uid", o.clusterUID}, [2]string{"--out", o.out}); err != nil {
		return err
	}
	// Offline and before any input is read: the same check the command-file parser makes.
	return command.CheckClusterUID("--cluster-uid", o.clusterUID)
}

func (o *commandNewOptions) run(_ context.Context, s streams) error {
	// The path first: a command file that could not be written is refused before any input is read.
	if err := stablefile.CheckCreatable("command file", o.out); err != nil {
		return err
	}
	if o.fromReceipt != "" {
		return o.runFromReceipt(s)
	}
	c := evidence.Command{Schema: evidence.SchemaCommand, Command: evidence.CommandPreflight, Store: o.store,
		ExpectedClusterUID: o.clusterUID, FieldManager: evidence.FieldManager}
	var err error
	if c.Manifest.Digest, err = fileDigest(o.manifest, evidence.RoleManifest, ceremony.MaxManifest); err != nil {
		return err
	}
	if c.LockReport.Digest, err = fileDigest(o.lockReport, evidence.RoleLockReport, ceremony.MaxLockReport); err != nil {
		return err
	}
	if c.Kubeconfig.Digest, err = fileDigest(o.kubeconfig, evidence.RoleKubeconfig, ceremony.MaxKubeconfig); err != nil {
		return err
	}
	exe, err := stablefile.InspectExecutable(o.kubectl)
	if err != nil {
		return err
	}
	c.Kubectl.Digest = exe.Digest()
	_ = exe.Close()
	c.Manifest.Path, c.LockReport.Path, c.Kubeconfig.Path, c.Kubectl.Path = o.manifest, o.lockReport, o.kubeconfig, o.kubectl
	c.Kubeconfig.Context = o.context
	raw, err := json.MarshalIndent(&c, "", "  ")
	if err != nil {
		return fmt.Errorf("encode command: %w", err)
	}
	raw = append(raw, '\n')
	// The file must parse as ql3 parses it, and pass every offline check of the preflight.
	pc, err := command.Parse(raw)
	if err != nil {
		return err
	}
	off, err := ceremony.CheckOffline(pc)
	if err != nil {
		return err
	}
	if err := stablefile.Create("command file", o.out, raw); err != nil {
		return err
	}
	// The next command runs as printed: every argument shell-quoted (finding 16 of issue 22).
	next := "ql3 preflight --command-file=" + shellQuote(o.out) + " --write-apply-command=" +
		shellQuote(strings.TrimSuffix(o.out, filepath.Ext(o.out))+"-apply.json")
	res := commandFileResult{OK: true, Path: o.out, Digest: evidence.FromBytes(raw), Release: off.ReleaseVersion, Command: c, Next: next}
	var b strings.Builder
	// Every path and value is quoted when it holds a control character: the review shows only
	// lines ql3 wrote.
	q := refuse.Quoted
	fmt.Fprintf(&b, "wrote %s (%s)\n", q(o.out), res.Digest)
	fmt.Fprintf(&b, "store        %s\n", q(c.Store))
	fmt.Fprintf(&b, "manifest     %s %s (%d resources)\n", q(c.Manifest.Path), c.Manifest.Digest, off.Resources)
	fmt.Fprintf(&b, "lock report  %s %s (qinglong %s, commit %s)\n", q(c.LockReport.Path), c.LockReport.Digest, q(off.ReleaseVersion), q(off.CatalogCommit))
	k := off.Kubeconfig
	fmt.Fprintf(&b, "kubeconfig   %s %s\n", q(c.Kubeconfig.Path), c.Kubeconfig.Digest)
	fmt.Fprintf(&b, "context      %s (server %s, user %s, auth %s)\n", q(c.Kubeconfig.Context), q(k.Server), refuse.Ident(k.User), q(k.AuthKind))
	fmt.Fprintf(&b, "kubectl      %s %s\n", q(c.Kubectl.Path), c.Kubectl.Digest)
	fmt.Fprintf(&b, "cluster uid  %s (as given: the preflight refuses any other cluster)\n", c.ExpectedClusterUID)
	fmt.Fprintf(&b, "next: %s\n", next)
	res.text = b.String()
	return o.root.printResult(s.out, res, nil)
}

// commandFileResult: a command file written, and the command to run next.
type commandFileResult struct {
	OK      bool             `json:"ok"`
	Path    string           `json:"path"`
	Digest  digest.Digest    `json:"digest"`
	Release string           `json:"release"`
	Command evidence.Command `json:"command"`
	Next    string           `json:"next"`
	text    string           // one review line per input, the next line last
}

func (r commandFileResult) writeText(w io.Writer) error {
	_, err := io.WriteString(w, r.text)
	return err
}

// fileDigest reads a private input as the preflight reads it and returns its digest.
func fileDigest(path, role string, ceiling int64) (digest.Digest, error) {
	f, err := stablefile.Read(path, role, ceiling)
	if err != nil {
		return "", err
	}
	return f.Digest, nil
}

// runFromReceipt writes the live-audit command file of a published receipt: the target of the
// apply command it answers, command cluster.deployment.live.audit, and the receipt's digest.
func (o *commandNewOptions) runFromReceipt(s streams) error {
	rd, _ := digestArg("--from-receipt", o.fromReceipt)
	st, err := store.Open(o.store)
	if err != nil {
		return err
	}
	defer st.Close()
	var rc evidence.Receipt
	if err := getRecord(st, rd, evidence.MediaTypeReceipt, &rc); err != nil {
		return err
	}
	if pub, ok, err := st.GetIndex(evidence.IndexReceipts, rc.Command.Digest); err != nil {
		return err
	} else if !ok || pub.Digest != rd {
		return refuse.New(ceremony.CodeLiveReceiptNotFound, "receipt %s is not published in store %s", rd, o.store)
	}
	var c evidence.Command
	if err := getRecord(st, rc.Command.Digest, evidence.MediaTypeCommand, &c); err != nil {
		return err
	}
	c.Command, c.Preflight, c.Receipt = evidence.CommandLiveAudit, nil, &rd
	raw, err := json.MarshalIndent(&c, "", "  ")
	if err != nil {
		return fmt.Errorf("encode command: %w", err)
	}
	raw = append(raw, '\n')
	if _, err := command.Parse(raw); err != nil {
		return err
	}
	if err := stablefile.Create("command file", o.out, raw); err != nil {
		return err
	}
	next := "ql3 live-audit --command-file=" + shellQuote(o.out)
	return o.root.printResult(s.out, commandFileResult{OK: true, Path: o.out, Digest: evidence.FromBytes(raw),
		Release: rc.Lock.ReleaseVersion, Command: c, Next: next,
		text: fmt.Sprintf("wrote %s (%s)\nreceipt      %s (release %s, cluster %s)\nnext: %s\n", refuse.Quoted(o.out), evidence.FromBytes(raw), rd, refuse.Quoted(rc.Lock.ReleaseVersion), refuse.Quoted(rc.ClusterUID), next)}, nil)
}

// getRecord reads a record of mediaType from the store (re-hashed, canonical, closed shape).
func getRecord(st *store.Store, d digest.Digest, mediaType string, v any) error {
	b, err := st.Get(d)
	if err != nil {
		return err
	}
	return evidence.DecodeRecord(mediaType, b, v)
}
