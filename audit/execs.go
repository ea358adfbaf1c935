package audit

import (
	"fmt"
	"slices"
	"strings"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/verdict/argv"
	"github.com/qinglong/ql3/verdict/convergence"
	"github.com/qinglong/ql3/verdict/kubeout"
)

// CodeVersions: a preflight report's versions member is not what its stored version read shows
// (kubeout.ReadVersions re-derives it), or the stored read cannot be read as versions.
const CodeVersions refuse.Code = "AUDIT_VERSIONS_MISMATCH"

// execRun is one loaded exec record and its stored output.
type execRun struct {
	desc   evidence.Descriptor
	rec    evidence.Exec
	stdout []byte
}

// execsCheck checks the exec records of r: the required steps in the required order, each run as
// the ceremony must run it, then the verdict of each step re-derived from its stored stdout.
func (a *auditor) execsCheck(r *run) ([]execRun, bool) {
	r.steps = expectedSteps(r.steps, r.execs)
	var runs []execRun
	ok := a.check(r.name("execs"), func() (string, error) {
		if len(r.execs) != len(r.steps) {
			return "", refuse.New(CodeExecSequence, "%d exec records where the steps %s are required", len(r.execs), strings.Join(r.steps, ", "))
		}
		for i, d := range r.execs {
			er, err := a.execRecord(r, d, r.steps[i], i)
			if err != nil {
				return "", err
			}
			runs = append(runs, er)
		}
		return fmt.Sprintf("%s: pinned kubectl, fixed argv in canonical form and environment, stdin and byte counts bound, exit 0", strings.Join(r.steps, ", ")), nil
	})
	if !ok {
		return nil, false
	}
	return runs, a.verdicts(r, runs)
}

// expectedSteps is steps without the namespace read when the records hold one fewer: whether the
// read had to run is known only from the convergence read, and namespaceRead checks it there.
func expectedSteps(steps []string, execs []evidence.Descriptor) []string {
	if i := slices.Index(steps, evidence.StepNamespaces); i >= 0 && len(execs) == len(steps)-1 {
		return slices.Delete(slices.Clone(steps), i, i+1)
	}
	return steps
}

// namespaceRead binds the namespace read to the objects the convergence read found: a run holds
// it exactly when they live in a namespace the manifest does not hold, and it names exactly those
// (convergence.OutsideNamespaces). It returns the namespaces the stored read shows.
func namespaceRead(r *run, live []evidence.LiveObject, runs []execRun) ([]convergence.Namespace, error) {
	names, err := convergence.OutsideNamespaces(r.lockResult.Objects, live)
	if err != nil {
		return nil, err
	}
	var read *execRun
	for i := range runs {
		if runs[i].rec.Step == evidence.StepNamespaces {
			read = &runs[i]
		}
	}
	switch {
	case len(names) == 0 && read == nil:
		return nil, nil
	case len(names) == 0:
		return nil, refuse.New(CodeExecSequence, "a namespace read where the objects found live in no namespace the manifest does not hold")
	case read == nil:
		return nil, refuse.New(CodeExecSequence, "no namespace read, where the objects found live in %d namespace(s) the manifest does not hold", len(names))
	}
	if got := argv.Operands(evidence.StepNamespaces, read.rec.Argv); !slices.Equal(got, names) {
		return nil, refuse.New(CodeExecSequence, "the namespace read names %d namespace(s), not the %d the objects found live in (or other ones)", len(got), len(names))
	}
	return convergence.ReadNamespaces(names, read.stdout)
}

func (a *auditor) execRecord(r *run, d evidence.Descriptor, step string, i int) (execRun, error) {
	var e evidence.Exec
	if err := a.load(d, evidence.MediaTypeExec, &e); err != nil {
		return execRun{}, err
	}
	if e.Step != step {
		return execRun{}, refuse.New(CodeExecSequence, "exec %d is step %q where %q is required", i, e.Step, step)
	}
	if err := argv.CheckInvocation(step, r.pc.Command.Kubeconfig.Context, e.Argv, e.Env); err != nil {
		return execRun{}, refuse.Wrap(refuse.CodeOf(err), err, "exec %d (%s)", i, step)
	}
	if err := checkArgvForm(e.Argv); err != nil {
		return execRun{}, refuse.Wrap(refuse.CodeOf(err), err, "exec %d (%s)", i, step)
	}
	if e.KubectlDigest != r.pc.Command.Kubectl.Digest {
		return execRun{}, refuse.New(CodeKubectl, "exec %d (%s) ran kubectl %s, the command pins %s", i, step, e.KubectlDigest, r.pc.Command.Kubectl.Digest)
	}
	if argv.ReadsStdin(step) != (e.Stdin != nil) || (e.Stdin != nil && *e.Stdin != r.manifest) {
		return execRun{}, refuse.New(CodeExecStdin, "exec %d (%s) stdin is not exactly the manifest blob where the step requires it", i, step)
	}
	if e.StdoutBytes != e.Stdout.Size || e.StderrBytes != e.Stderr.Size {
		return execRun{}, refuse.New(CodeExecBytes, "exec %d (%s) records %d/%d stdout/stderr bytes, its descriptors say %d/%d",
			i, step, e.StdoutBytes, e.StderrBytes, e.Stdout.Size, e.Stderr.Size)
	}
	out, err := a.blob(e.Stdout, evidence.MediaTypeStdout)
	if err != nil {
		return execRun{}, err
	}
	if _, err := a.blob(e.Stderr, evidence.MediaTypeStderr); err != nil {
		return execRun{}, err
	}
	if e.ExitCode != 0 {
		return execRun{}, refuse.New(CodeExecExit, "exec %d (%s) exited %d", i, step, e.ExitCode)
	}
	return execRun{desc: d, rec: e, stdout: out}, nil
}

// verdicts re-derives each step's verdict from its stored stdout with the ceremony's readers.
func (a *auditor) verdicts(r *run, runs []execRun) bool {
	ok := true
	objects := resources(r)
	for i, er := range runs {
		step := er.rec.Step
		switch step {
		case evidence.StepIdentity, evidence.StepIdentityFinal:
			ok = a.check(r.name(fmt.Sprintf("identity[%d]", i)), func() (string, error) {
				uid, err := kubeout.NamespaceUID(er.stdout)
				if err != nil {
					return "", err
				}
				if uid != r.pc.Command.ExpectedClusterUID || uid != r.clusterUID {
					return "", refuse.New(CodeClusterUID, "%s read shows kube-system uid %s, the command expects %s", step, uid, r.pc.Command.ExpectedClusterUID)
				}
				return fmt.Sprintf("%s: kube-system uid %s", step, uid), nil
			}) && ok
		case evidence.StepVersion:
			ok = a.check(r.name("versions"), func() (string, error) {
				v, err := kubeout.ReadVersions(er.stdout)
				if err != nil {
					return "", refuse.Wrap(CodeVersions, err, "the stored version read")
				}
				if r.versions == nil || *v != *r.versions {
					return "", refuse.New(CodeVersions, "the report's versions member is not what the stored version read shows (kubectl %s, API server %s, %d minors apart)",
						v.Kubectl, v.Server, v.MinorsApart)
				}
				return fmt.Sprintf("kubectl %s, API server %s: %d minor(s) apart, supported skew %v", v.Kubectl, v.Server, v.MinorsApart, v.SupportedSkew), nil
			}) && ok
		case evidence.StepDryRun, evidence.StepApply:
			ok = a.check(r.name(step+" output"), func() (string, error) {
				if r.lockResult == nil {
					return "", refuse.New(CodeLock, "no verified lock to compare the %s output with", step)
				}
				if err := kubeout.Applied(er.stdout, objects, step == evidence.StepDryRun); err != nil {
					return "", err
				}
				return fmt.Sprintf("%d objects reported serverside-applied in manifest order", len(objects)), nil
			}) && ok
		}
	}
	return ok
}

func resources(r *run) []kubeout.Resource {
	if r.lockResult == nil {
		return nil
	}
	out := make([]kubeout.Resource, 0, len(r.lockResult.Objects))
	for _, o := range r.lockResult.Objects {
		out = append(out, kubeout.Resource{APIVersion: o.APIVersion, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name})
	}
	return out
}

// convergenceCheck runs the ceremony's convergence verifier on the stored convergence read and
// requires the receipt's object list to be exactly what it derives.
func (a *auditor) convergenceCheck(r *run, runs []execRun, claimed []evidence.LiveObject) bool {
	return a.check("convergence", func() (string, error) {
		if r.lockResult == nil {
			return "", refuse.New(CodeLock, "no verified lock to judge convergence against")
		}
		var read *execRun
		for i := range runs {
			if runs[i].rec.Step == evidence.StepConvergence {
				read = &runs[i]
			}
		}
		if read == nil {
			return "", refuse.New(CodeExecSequence, "no convergence read")
		}
		out, err := convergence.Verify(convergence.Input{Objects: r.lockResult.Objects, Authorities: r.lockResult.Authorities,
			FieldManager: evidence.FieldManager, Stdout: read.stdout})
		if err != nil {
			return "", err
		}
		nss, err := namespaceRead(r, out.Objects, runs)
		if err != nil {
			return "", err
		}
		if err := convergence.CheckNamespaces(nss); err != nil {
			return "", err
		}
		if len(out.Objects) != len(claimed) {
			return "", refuse.New(CodeObjects, "receipt lists %d objects, the convergence read shows %d", len(claimed), len(out.Objects))
		}
		for i := range claimed {
			if claimed[i] != out.Objects[i] {
				return "", refuse.New(CodeObjects, "receipt object %d (%s %s/%s) differs from the convergence read", i, claimed[i].Kind, claimed[i].Namespace, claimed[i].Name)
			}
		}
		return fmt.Sprintf("%d objects converged: uids, resourceVersions, fields, images, annotations and %s ownership; %d namespace(s) outside the manifest active",
			len(claimed), evidence.FieldManager, len(nss)), nil
	})
}
