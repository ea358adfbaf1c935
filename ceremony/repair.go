package ceremony

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/stablefile"
	"github.com/qinglong/ql3/verdict/convergence"
)

// Repair is how a drifted release is brought back without --force-conflicts: every field that has
// not converged with the managers that hold it now, and the commands to run, in order. The
// kubectl commands hand the fields other managers hold back (a JSON patch of managedFields, read
// from a private file ql3 wrote); the ql3 commands then re-assert the release (a new preflight of
// the same lock, its apply, and the live audit of the new receipt).
type Repair struct {
	Dir     string         `json:"dir,omitempty"` // the private directory holding the files the commands read
	Objects []RepairObject `json:"objects"`
	Steps   []RepairStep   `json:"steps"`
	Error   string         `json:"error,omitempty"` // the files could not be written: no steps
	// Note says what the steps leave as it is: fields other managers added, which no apply
	// removes (the live audit's added-by-other findings).
	Note string `json:"note,omitempty"`
}

// RepairObject is one live object that has not converged and its drifted fields.
type RepairObject struct {
	APIVersion      string                     `json:"apiVersion"`
	Kind            string                     `json:"kind"`
	Namespace       string                     `json:"namespace,omitempty"`
	Name            string                     `json:"name"`
	UID             string                     `json:"uid"`
	ResourceVersion string                     `json:"resourceVersion"`
	Fields          []convergence.DriftedField `json:"fields"`
}

// RepairStep is one command line, runnable as printed (shell-quoted), and its argv.
type RepairStep struct {
	Argv []string `json:"argv"`
	Line string   `json:"line"`
	File string   `json:"file,omitempty"` // the file it reads, written by ql3 (0600, in Dir)
	Why  string   `json:"why"`
}

// repairDirName names the repair directory of a live-audit report.
func repairDirName(report string) string {
	hex := strings.TrimPrefix(report, "sha256:")
	if len(hex) > 12 {
		hex = hex[:12]
	}
	return "ql3-repair-" + hex
}

// buildRepair computes the handbacks from the convergence read and writes the repair files into
// a new private directory beside the command file. A failure to write leaves the steps out and
// says why: the drift report stands on its own.
func (s *session) buildRepair(stdout []byte, report string) *Repair {
	hb, err := convergence.Handbacks(convergence.Input{Objects: s.lock.Objects, Authorities: s.lock.Authorities,
		FieldManager: evidence.FieldManager, Stdout: stdout})
	r := &Repair{Objects: []RepairObject{}, Steps: []RepairStep{}}
	if err != nil {
		r.Error = "the convergence read cannot be read for a repair: " + err.Error()
		return r
	}
	for _, h := range hb {
		r.Objects = append(r.Objects, RepairObject{APIVersion: h.Object.APIVersion, Kind: h.Object.Kind, Namespace: h.Object.Namespace,
			Name: h.Object.Name, UID: h.Object.UID, ResourceVersion: h.Object.ResourceVersion, Fields: h.Fields})
	}
	parent := s.opts.RepairDir
	if parent == "" {
		parent = filepath.Dir(s.opts.CommandFile)
	}
	dir := filepath.Join(parent, repairDirName(report))
	if err := makePrivateDir(parent, filepath.Base(dir)); err != nil {
		r.Error = fmt.Sprintf("repair directory %s: %v", dir, err)
		return r
	}
	r.Dir = dir
	c := &s.pc.Command
	kc := []string{c.Kubectl.Path, "--kubeconfig=" + c.Kubeconfig.Path, "--context=" + c.Kubeconfig.Context}
	n := 0
	for _, h := range hb {
		if h.Patch == nil {
			continue
		}
		n++
		name := fmt.Sprintf("%02d-%s-%s.json", n, strings.ToLower(h.Object.Kind), h.Object.Name)
		file := filepath.Join(dir, name)
		if err := stablefile.Create("repair patch", file, h.Patch); err != nil {
			r.Error = err.Error()
			r.Steps = nil
			return r
		}
		argv := append([]string(nil), kc...)
		if h.Object.Namespace != "" {
			argv = append(argv, "--namespace="+h.Object.Namespace)
		}
		argv = append(argv, "patch", resourceArg(h.Object.APIVersion, h.Object.Kind), h.Object.Name, "--type=json", "--patch-file="+file)
		var holders []string
		seen := map[string]bool{}
		for _, f := range h.Fields {
			for _, ho := range f.Holders {
				if !seen[ho.String()] {
					seen[ho.String()] = true
					holders = append(holders, ho.String())
				}
			}
		}
		r.Steps = append(r.Steps, repairStep(argv, file, fmt.Sprintf("hand the fields of %s %s held by %s back (their managedFields members removed; refused by the server if the object changed since this audit)",
			h.Object.Kind, objectName(h.Object.Namespace, h.Object.Name), strings.Join(holders, ", "))))
	}
	pre := *c
	pre.Command, pre.Preflight, pre.Receipt = evidence.CommandPreflight, nil, nil
	b, err := json.MarshalIndent(&pre, "", "  ")
	preFile, applyFile := filepath.Join(dir, "preflight.json"), filepath.Join(dir, "apply.json")
	if err == nil {
		err = stablefile.Create("repair preflight command", preFile, append(b, '\n'))
	}
	if err != nil {
		r.Error = err.Error()
		r.Steps = nil
		return r
	}
	r.Steps = append(r.Steps,
		repairStep([]string{"ql3", "preflight", "--command-file=" + preFile, "--write-apply-command=" + applyFile}, preFile,
			"re-assert the release: a new preflight of the same lock (no conflict is left to refuse it)"),
		repairStep([]string{"ql3", "apply", "--command-file=" + applyFile}, "", "apply it (server-side, never --force-conflicts)"),
		repairStep([]string{"ql3", "live-audit", "--command-file=" + applyFile}, "", "the live audit of the new receipt"))
	return r
}

func repairStep(argv []string, file, why string) RepairStep {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = shellQuote(a)
	}
	return RepairStep{Argv: argv, Line: strings.Join(q, " "), File: file, Why: why}
}

// resourceArg names a kind for kubectl unambiguously: kind.group (kind alone in the core group).
func resourceArg(apiVersion, kind string) string {
	k := strings.ToLower(kind)
	if g, _, ok := strings.Cut(apiVersion, "/"); ok {
		return k + "." + g
	}
	return k
}

// shellQuote quotes a word for a POSIX shell unless it is made of characters no shell treats
// specially.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,@+%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// makePrivateDir creates name (0700, never an existing one) in parent, held by descriptor.
func makePrivateDir(parent, name string) error {
	fd, _, err := stablefile.OpenDir(parent)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Mkdirat(fd, name, 0o700); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("exists already; ql3 never reuses it")
		}
		return err
	}
	// The umask may have cleared bits of 0700 only; Fchmodat makes it exactly 0700.
	return unix.Fchmodat(fd, name, 0o700, 0)
}

// WriteText prints the repair after the drift lines: each drifted field with its holders, then
// the commands, each on a line of its own, indented, runnable as printed.
func (r *Repair) WriteText(w io.Writer, release string) {
	for _, o := range r.Objects {
		for _, f := range o.Fields {
			live := f.Live
			if !f.Present {
				live = "(absent)"
			}
			holders := "no manager (removed)"
			if len(f.Holders) > 0 {
				hs := make([]string, len(f.Holders))
				for i, h := range f.Holders {
					hs[i] = h.String()
				}
				holders = strings.Join(hs, ", ")
			} else if f.Present {
				holders = "no other manager"
			}
			fmt.Fprintf(w, "field: %s %s %s: live %s expected %s, held by %s\n", o.Kind, objectName(o.Namespace, o.Name), f.Path, live, f.Expected, holders)
		}
	}
	if r.Error != "" {
		fmt.Fprintf(w, "repair: no commands: %s\n", r.Error)
		return
	}
	fmt.Fprintf(w, "repair: hand the fields back without --force-conflicts, then re-assert release %s; run in order (files in %s):\n", release, r.Dir)
	for _, s := range r.Steps {
		fmt.Fprintf(w, "  %s\n", s.Line)
	}
	if r.Note != "" {
		fmt.Fprintf(w, "repair: note: %s\n", r.Note)
	}
}
