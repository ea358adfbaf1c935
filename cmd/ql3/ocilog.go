package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/qinglong/ql3/deploylog"
	"github.com/qinglong/ql3/deploylog/policy"
	"github.com/qinglong/ql3/internal/input"
	"github.com/qinglong/ql3/ociartifact"
	"github.com/qinglong/ql3/ociartifact/transfer"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
)

// logAttached is what push and export say of the log referrer (docs/oci.md, "The log
// referrer"): attached, with the root's leaf and the checkpoint, or not, with the reason.
type logAttached struct {
	Attached bool   `json:"attached"`
	Origin   string `json:"origin,omitempty"`
	Index    *int64 `json:"index,omitempty"`
	Size     int64  `json:"checkpointSize,omitempty"`
	// Reason says why none was attached: the code of LOG_NOT_INITIALIZED (the store has no log),
	// LOG_RECORD_NOT_LOGGED (no leaf publishes the root) or LOG_UNSIGNED (no signed checkpoint
	// covers its leaf yet).
	Reason refuse.Code `json:"reason,omitempty"`
}

// attachLog attaches the store's log to c (ociartifact.Collected.AttachStoreLog) and says on w
// what was attached, or why nothing was when the store has a log (a store without one is
// silent, as before logs): push and export still carry the evidence, and a pull with --log-key
// refuses it (OCI_LOG_MISSING).
func attachLog(st *store.Store, c *ociartifact.Collected, w io.Writer) (logAttached, error) {
	none, err := c.AttachStoreLog(st)
	if err != nil {
		return logAttached{}, err
	}
	if none != nil {
		r := logAttached{Reason: refuse.CodeOf(none)}
		if r.Reason != store.CodeLogNotInitialized {
			fmt.Fprintf(w, "ql3: log: no log referrer attached: %s: %v\n", r.Reason, none)
		}
		return r, nil
	}
	cp, idx := c.Log.Checkpoint, c.Log.Index
	fmt.Fprintf(w, "ql3: log: attached the proof of leaf %d and the %d leaves of checkpoint %s size %d\n", idx, cp.Size, cp.Origin, cp.Size)
	return logAttached{Attached: true, Origin: cp.Origin, Index: &idx, Size: cp.Size}, nil
}

// pullLogFlags are store pull's log options: with --log-key or --policy the root's inclusion is
// checked before anything is written and the log installed with it.
type pullLogFlags struct {
	logKey, policy, since string
}

func (f *pullLogFlags) add(c *cobra.Command) {
	pathVar(c.Flags(), &f.logKey, "log-key", "the deployment log's verifier key: refuse unless the root is included in a checkpoint it signed; install the log")
	pathVar(c.Flags(), &f.policy, "policy", "a C2SP tlog-policy (log key, witnesses, quorum) instead of --log-key; keeps the policy witnesses' cosignatures")
	pathVar(c.Flags(), &f.since, "since", "a signed checkpoint the pulled log must extend (with --log-key or --policy)")
}

func (f *pullLogFlags) validate() error {
	if f.logKey != "" && f.policy != "" {
		return refuse.New(CodeFlagNotApplicable, "--log-key and --policy both name the log's key: give one")
	}
	if f.since != "" && f.logKey == "" && f.policy == "" {
		return refuse.New(CodeFlagNotApplicable, "--since needs --log-key or --policy")
	}
	return nil
}

func (f *pullLogFlags) options() (transfer.LogOptions, error) {
	v, err := checkpointVerifier(f.logKey, f.policy)
	if err != nil || v == nil {
		return transfer.LogOptions{}, err
	}
	o := transfer.LogOptions{Verifier: v}
	if pv, ok := v.(policy.Verifier); ok {
		o.Policy = pv.Policy
	}
	if f.since != "" {
		if o.Since, err = input.ReadFile(f.since, deploylog.MaxNoteSize); err != nil {
			return transfer.LogOptions{}, err
		}
	}
	return o, nil
}

// pulledLog is what a pull with the log says: the checkpoint the root is proven in.
type pulledLog struct {
	Origin string `json:"origin"`
	Size   int64  `json:"checkpointSize"`
}
