package ceremony

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"
	"golang.org/x/sys/unix"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/evidence/command"
	"github.com/qinglong/ql3/internal/stablefile"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
	"github.com/qinglong/ql3/verdict/plan"
)

// Reason codes of status.
const (
	// CodeStatusNoReceipt: the store holds no published receipt of the cluster, so it says
	// nothing is deployed there by ql3.
	CodeStatusNoReceipt refuse.Code = "STATUS_NO_RECEIPT"
	// CodeStatusCommandFile: the live-audit command file status keeps for a current receipt
	// (ql3-status/ beside the command file) exists with other content, or cannot be written.
	CodeStatusCommandFile refuse.Code = "STATUS_COMMAND_FILE"
)

// StatusOptions configure Status. CommandFile (any command file of the cluster: preflight, apply
// or live audit) gives the store, the cluster and the place of the live audits' command files;
// without it, Store and ClusterUID give the offline part alone.
type StatusOptions struct {
	CommandFile string
	Store       string
	ClusterUID  string
	StepTimeout time.Duration // per kubectl run; DefaultStepTimeout when zero
	Progress    io.Writer
}

// StatusReceipt is one current receipt: the last published receipt of the cluster for some of
// its objects (plan.Lineage.Current), what it superseded, and its live audit.
type StatusReceipt struct {
	Receipt    digest.Digest `json:"receipt"`
	Release    string        `json:"release"`
	FinishedAt string        `json:"finishedAt"`
	Target     digest.Digest `json:"target"`
	Objects    int           `json:"objects"`
	Supersedes []Supersede   `json:"supersedes"`
	// LeftBehind: a later receipt of the cluster took over the receipt's other objects; these it
	// still is the last receipt of, left behind in the cluster (ql3 never deletes). Such a
	// receipt is not live-audited: its audit would report the taken-over objects as drift.
	LeftBehind  []string         `json:"leftBehind,omitempty"`
	CommandFile string           `json:"liveAuditCommandFile,omitempty"`
	LiveAudit   *LiveAuditResult `json:"liveAudit,omitempty"`
}

// StatusResult is what status found: the current receipts of the cluster in the store, and,
// with a command file, their live audits.
type StatusResult struct {
	OK         bool            `json:"ok"` // live: every current receipt converged; offline: true
	Store      string          `json:"store"`
	ClusterUID string          `json:"clusterUid"`
	Live       bool            `json:"live"` // the live audits ran
	Current    []StatusReceipt `json:"current"`
}

// Status answers "what does this store say is deployed on that cluster now, and is it still
// there": the current receipts (plan.Lineage.Current over every object of the cluster's
// receipts), each with what it superseded, then a live audit of each (read-only; each publishes
// its live-audit report). It returns a LIVE_DRIFT refusal alongside the result when a live audit
// found drift.
func Status(ctx context.Context, opts StatusOptions) (*StatusResult, error) {
	if opts.CommandFile != "" {
		cf, err := ReadCommand(opts.CommandFile, "")
		if err != nil {
			return nil, err
		}
		opts.Store, opts.ClusterUID = cf.Parsed.Command.Store, cf.Parsed.Command.ExpectedClusterUID
	}
	st, err := store.Open(opts.Store)
	if err != nil {
		return nil, err
	}
	res, err := statusOffline(st, opts)
	st.Close()
	if err != nil || opts.CommandFile == "" {
		return res, err
	}
	res.Live = true
	dir := filepath.Join(filepath.Dir(opts.CommandFile), "ql3-status")
	var drift error
	for i := range res.Current {
		cr := &res.Current[i]
		if len(cr.LeftBehind) > 0 {
			continue
		}
		path, err := statusCommandFile(dir, opts.Store, cr.Receipt)
		if err != nil {
			return nil, err
		}
		cr.CommandFile = path
		la, err := LiveAudit(ctx, Options{CommandFile: path, Progress: opts.Progress, StepTimeout: opts.StepTimeout,
			RepairDir: filepath.Dir(opts.CommandFile),
			// A receipt current for some objects may have lost others to a later receipt: its
			// audit then names that receipt and prints no repair (LiveAudit).
			AllowSuperseded: true})
		if la == nil {
			return nil, err
		}
		cr.LiveAudit = la
		if err != nil && drift == nil {
			drift = err
		}
	}
	res.OK = drift == nil
	return res, drift
}

func statusOffline(st *store.Store, opts StatusOptions) (*StatusResult, error) {
	lin, err := loadLineage(st)
	if err != nil {
		return nil, err
	}
	var keys []plan.Key
	for _, p := range lin.Receipts {
		if p.Receipt.ClusterUID == opts.ClusterUID {
			keys = append(keys, plan.KeysOfReceipt(p.Receipt)...)
		}
	}
	cur := lin.Current(opts.ClusterUID, keys)
	if len(cur) == 0 {
		return nil, refuse.New(CodeStatusNoReceipt, "store %s holds no published receipt of cluster %s", opts.Store, opts.ClusterUID).
			WithHint("ql3 deploys a release with a preflight and an apply; ql3 history lists what the store holds")
	}
	res := &StatusResult{OK: true, Store: opts.Store, ClusterUID: opts.ClusterUID}
	for _, p := range cur {
		sr := StatusReceipt{Receipt: p.Desc.Digest, Release: p.Receipt.Lock.ReleaseVersion, FinishedAt: p.Receipt.FinishedAt,
			Target: p.Receipt.Target, Objects: len(p.Receipt.Objects), Supersedes: []Supersede{}}
		if later := lin.SupersededBy(p.Desc.Digest); len(later) > 0 {
			var lk []plan.Key
			for _, q := range later {
				lk = append(lk, plan.KeysOfReceipt(q.Receipt)...)
			}
			for _, k := range plan.KeysOfReceipt(p.Receipt) {
				if !sharesKey(lk, k) {
					sr.LeftBehind = append(sr.LeftBehind, k.Kind+" "+objectName(k.Namespace, k.Name))
				}
			}
		}
		for _, q := range lin.Supersedes(p.Desc.Digest) {
			sr.Supersedes = append(sr.Supersedes, Supersede{Receipt: q.Desc.Digest, Release: q.Receipt.Lock.ReleaseVersion,
				FinishedAt: q.Receipt.FinishedAt, Target: q.Receipt.Target})
		}
		res.Current = append(res.Current, sr)
	}
	return res, nil
}

// sharesKey reports whether k can be an object of keys (an empty namespace matches any, as
// plan.Key's sharing does).
func sharesKey(keys []plan.Key, k plan.Key) bool {
	for _, o := range keys {
		if o.Kind == k.Kind && o.Name == k.Name && (o.Namespace == k.Namespace || o.Namespace == "" || k.Namespace == "") {
			return true
		}
	}
	return false
}

// statusCommandFile writes (or finds, byte for byte) the live-audit command file of receipt rd:
// the target of the apply command it answers, as ql3 command new --from-receipt writes it. It
// lives in dir (0700, created when absent), named by the receipt, never replaced.
func statusCommandFile(dir, storeDir string, rd digest.Digest) (string, error) {
	st, err := store.Open(storeDir)
	if err != nil {
		return "", err
	}
	defer st.Close()
	b, err := st.Get(rd)
	if err != nil {
		return "", err
	}
	var rc evidence.Receipt
	if err := evidence.DecodeRecord(evidence.MediaTypeReceipt, b, &rc); err != nil {
		return "", refuse.Wrap(CodeRecordInvalid, err, "receipt %s", rd)
	}
	cb, err := st.GetDescriptor(rc.Command)
	if err != nil {
		return "", err
	}
	var c evidence.Command
	if err := evidence.DecodeRecord(evidence.MediaTypeCommand, cb, &c); err != nil {
		return "", refuse.Wrap(CodeRecordInvalid, err, "command %s", rc.Command.Digest)
	}
	c.Command, c.Preflight, c.Receipt = evidence.CommandLiveAudit, nil, &rd
	raw, err := json.MarshalIndent(&c, "", "  ")
	if err != nil {
		return "", refuse.Wrap(CodeStatusCommandFile, err, "encode the live-audit command")
	}
	raw = append(raw, '\n')
	path := filepath.Join(dir, "live-audit-"+strings.TrimPrefix(string(rd), "sha256:")[:12]+".json")
	if err := ensurePrivateDir(dir); err != nil {
		return "", refuse.Wrap(CodeStatusCommandFile, err, "directory %s", dir)
	}
	if err := stablefile.Create("status live-audit command", path, raw); err != nil {
		// A file of an earlier status run is reused when it is this very command.
		if old, rerr := stablefile.Read(path, evidence.RoleCommandFile, command.MaxFile); rerr == nil && bytes.Equal(old.Bytes, raw) {
			return path, nil
		}
		return "", refuse.Wrap(CodeStatusCommandFile, err, "live-audit command of receipt %s", rd)
	}
	return path, nil
}

// ensurePrivateDir creates dir (0700) in its parent, held by descriptor, unless it exists; the
// file written into it checks that it is a private directory of ours.
func ensurePrivateDir(dir string) error {
	fd, _, err := stablefile.OpenDir(filepath.Dir(dir))
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Mkdirat(fd, filepath.Base(dir), 0o700); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return nil
		}
		return err
	}
	return unix.Fchmodat(fd, filepath.Base(dir), 0o700, 0)
}

// WriteText prints the current receipts, then each live audit as live-audit prints it.
func (r *StatusResult) WriteText(w io.Writer) {
	fmt.Fprintf(w, "status: cluster %s, store %s: %d current receipt(s)\n", r.ClusterUID, r.Store, len(r.Current))
	for _, c := range r.Current {
		if len(c.LeftBehind) > 0 {
			fmt.Fprintf(w, "current: receipt %s, release %s, applied %s, for %d of its %d objects\n", c.Receipt, c.Release, c.FinishedAt, len(c.LeftBehind), c.Objects)
		} else {
			fmt.Fprintf(w, "current: receipt %s, release %s, applied %s, %d objects\n", c.Receipt, c.Release, c.FinishedAt, c.Objects)
		}
		for _, s := range c.Supersedes {
			fmt.Fprintf(w, "  supersedes: receipt %s, release %s, applied %s\n", s.Receipt, s.Release, s.FinishedAt)
		}
		if len(c.LeftBehind) > 0 {
			fmt.Fprintf(w, "  left behind: %s: later releases dropped them, ql3 never deletes (not audited live: its other objects are later receipts')\n", strings.Join(c.LeftBehind, ", "))
		}
		if c.LiveAudit != nil {
			c.LiveAudit.WriteText(w)
		}
	}
	if !r.Live {
		fmt.Fprintln(w, "live: not checked: this form reads the store only; give --command-file (any command file of this cluster) for the live audit")
	}
}
