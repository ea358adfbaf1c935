package audit

import (
	"fmt"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/evidence/command"
	"github.com/qinglong/ql3/evidence/lock"
	"github.com/qinglong/ql3/refuse"
)

// run is what a preflight report and a receipt both record of one ceremony run; the checks of
// this file apply to both.
type run struct {
	prefix       string // check name prefix: "" for the subject, "preflight." for a receipt's preflight
	command      evidence.Descriptor
	wantCommand  string // evidence.CommandPreflight or evidence.CommandApply
	target       digest.Digest
	inputs       evidence.Inputs
	kubeconfig   evidence.Descriptor
	manifest     evidence.Descriptor
	lockReport   evidence.Descriptor
	lock         evidence.LockBinding
	clusterUID   string
	fieldManager string
	execs        []evidence.Descriptor
	steps        []string           // the steps execs must be, in order
	versions     *evidence.Versions // a preflight report's versions member (nil in other runs)

	// derived by the checks, for the checks after them
	pc         *command.Parsed
	lockResult *lock.Result
}

func (r *run) name(n string) string { return r.prefix + n }

// commandCheck loads the command record and re-validates it with the ceremony's own parser.
func (a *auditor) commandCheck(r *run) bool {
	return a.check(r.name("command"), func() (string, error) {
		pc, err := a.commandRecord(r.command)
		if err != nil {
			return "", err
		}
		if pc.Command.Command != r.wantCommand {
			return "", refuse.New(CodeCommand, "command record %s is a %s command, not %s", r.command.Digest, pc.Command.Command, r.wantCommand)
		}
		return r.bindCommand(pc, "record")
	})
}

// bindCommand requires the command of the right kind, pc, to be the one the run's record (a
// record, or a report) binds: its target, the field manager and the cluster; r.pc is pc from
// then on.
func (r *run) bindCommand(pc *command.Parsed, record string) (string, error) {
	if pc.Target != r.target {
		return "", refuse.New(CodeTarget, "command %s has target %s, the %s binds %s", pc.Digest, pc.Target, record, r.target)
	}
	if r.fieldManager != evidence.FieldManager {
		return "", refuse.New(CodeClaim, "record names field manager %q, not %s", r.fieldManager, evidence.FieldManager)
	}
	if r.clusterUID != pc.Command.ExpectedClusterUID {
		return "", refuse.New(CodeClusterUID, "record names cluster %s, the command expects %s", r.clusterUID, pc.Command.ExpectedClusterUID)
	}
	r.pc = pc
	return fmt.Sprintf("%s command %s, target %s", pc.Command.Command, pc.Digest, pc.Target), nil
}

// inputsCheck binds every input record to the command: role, path, digest, the stored content
// where there is one, and the stable-file verdict re-derived from the recorded identity.
func (a *auditor) inputsCheck(r *run) bool {
	return a.check(r.name("inputs"), func() (string, error) {
		c := &r.pc.Command
		type want struct {
			desc    evidence.Descriptor
			role    string
			path    string
			digest  digest.Digest
			content *evidence.Descriptor // the blob the record must point at; nil for none
		}
		wants := []want{
			{r.inputs.Manifest, evidence.RoleManifest, c.Manifest.Path, c.Manifest.Digest, &r.manifest},
			{r.inputs.LockReport, evidence.RoleLockReport, c.LockReport.Path, c.LockReport.Digest, &r.lockReport},
			{r.inputs.Kubeconfig, evidence.RoleKubeconfig, c.Kubeconfig.Path, c.Kubeconfig.Digest, nil},
			{r.inputs.Kubectl, evidence.RoleKubectl, c.Kubectl.Path, c.Kubectl.Digest, nil},
		}
		var privateUID int64 = -1
		for _, w := range wants {
			var in evidence.Input
			if err := a.load(w.desc, evidence.MediaTypeInput, &in); err != nil {
				return "", err
			}
			if in.Role != w.role || in.Path != w.path || in.Digest != w.digest {
				return "", refuse.New(CodeInput, "input record %s (role %s) does not bind the command's %s path and digest", w.desc.Digest, in.Role, w.role)
			}
			if (in.Content == nil) != (w.content == nil) || (w.content != nil && *in.Content != *w.content) {
				return "", refuse.New(CodeInput, "input record of %s does not point at the stored %s blob", w.role, w.role)
			}
			if w.content != nil && in.Size != w.content.Size {
				return "", refuse.New(CodeInput, "input record of %s says %d bytes, the blob has %d", w.role, in.Size, w.content.Size)
			}
			if err := stableVerdict(&in, &privateUID); err != nil {
				return "", err
			}
		}
		if err := a.commandFileInput(r, privateUID); err != nil {
			return "", err
		}
		if r.manifest.Digest != c.Manifest.Digest || r.lockReport.Digest != c.LockReport.Digest {
			return "", refuse.New(CodeInput, "stored manifest or lock report blob is not the one the command pins")
		}
		return "5 input records bind the command's paths and digests; manifest and lock report blobs are the pinned ones", nil
	})
}

// commandFileInput binds the command file's input record to the command record: its stored raw
// bytes re-canonicalize to exactly the command record.
func (a *auditor) commandFileInput(r *run, privateUID int64) error {
	var in evidence.Input
	if err := a.load(r.inputs.CommandFile, evidence.MediaTypeInput, &in); err != nil {
		return err
	}
	if in.Role != evidence.RoleCommandFile || in.Content == nil || in.Content.Digest != in.Digest || in.Content.Size != in.Size {
		return refuse.New(CodeInput, "command file input record %s does not point at its raw bytes", r.inputs.CommandFile.Digest)
	}
	raw, err := a.blob(*in.Content, evidence.MediaTypeCommandFile)
	if err != nil {
		return err
	}
	canon, err := evidence.Canonicalize(raw)
	if err != nil {
		return refuse.Wrap(CodeInput, err, "stored command file does not canonicalize")
	}
	if evidence.FromBytes(canon) != r.command.Digest {
		return refuse.New(CodeInput, "stored command file canonicalizes to %s, not the command record %s", evidence.FromBytes(canon), r.command.Digest)
	}
	return stableVerdict(&in, &privateUID)
}

// stableVerdict re-derives the stable-file verdict (docs/rationale.md#4-private-inputs) from a recorded identity: private
// inputs are 0600 and share one owner; kubectl is executable, not group/other writable, and owned
// by that owner or root.
func stableVerdict(in *evidence.Input, privateUID *int64) error {
	var mode uint32
	if _, err := fmt.Sscanf(in.Mode, "%o", &mode); err != nil || len(in.Mode) != 4 {
		return refuse.New(CodeInput, "input record of %s has mode %q, not four octal digits", in.Role, in.Mode)
	}
	if in.Role == evidence.RoleKubectl {
		if mode&0o022 != 0 || mode&0o100 == 0 {
			return refuse.New(CodeInput, "kubectl input record has mode %s: writable by group or other, or not executable", in.Mode)
		}
		if in.UID != 0 && *privateUID >= 0 && in.UID != *privateUID {
			return refuse.New(CodeInput, "kubectl input record is owned by uid %d, neither root nor the operator", in.UID)
		}
		return nil
	}
	if mode != 0o600 {
		return refuse.New(CodeInput, "input record of %s has mode %s, not 0600", in.Role, in.Mode)
	}
	if *privateUID >= 0 && in.UID != *privateUID {
		return refuse.New(CodeInput, "input record of %s is owned by uid %d, the other private inputs by %d", in.Role, in.UID, *privateUID)
	}
	*privateUID = in.UID
	return nil
}

// kubeconfigCheck binds the redacted kubeconfig summary to the command's kubeconfig and context.
func (a *auditor) kubeconfigCheck(r *run) bool {
	return a.check(r.name("kubeconfig"), func() (string, error) {
		var k evidence.KubeconfigSummary
		if err := a.load(r.kubeconfig, evidence.MediaTypeKubeconfig, &k); err != nil {
			return "", err
		}
		c := &r.pc.Command
		if k.Digest != c.Kubeconfig.Digest || k.Context != c.Kubeconfig.Context {
			return "", refuse.New(CodeKubeconfig, "kubeconfig summary binds %s context %q, the command pins %s context %q",
				k.Digest, k.Context, c.Kubeconfig.Digest, c.Kubeconfig.Context)
		}
		switch k.AuthKind {
		case evidence.AuthClientCertificate, evidence.AuthToken, evidence.AuthBasic:
		default:
			return "", refuse.New(CodeKubeconfig, "kubeconfig summary has auth kind %q", k.AuthKind)
		}
		return fmt.Sprintf("context %s, cluster %s, user %s, auth %s", k.Context, k.Cluster, k.User, k.AuthKind), nil
	})
}

// lockCheck runs the lock verifier again on the stored manifest and lock report bytes and
// compares its facts with the recorded lock binding.
func (a *auditor) lockCheck(r *run) bool {
	return a.check(r.name("lock"), func() (string, error) {
		man, err := a.blob(r.manifest, evidence.MediaTypeManifest)
		if err != nil {
			return "", err
		}
		rep, err := a.blob(r.lockReport, evidence.MediaTypeLockReport)
		if err != nil {
			return "", err
		}
		key := [2]digest.Digest{r.manifest.Digest, r.lockReport.Digest}
		res, ok := a.locks[key]
		if !ok {
			if res, err = lock.Verify(man, rep); err != nil {
				return "", err
			}
			if a.locks == nil {
				a.locks = map[[2]digest.Digest]*lock.Result{}
			}
			a.locks[key] = res
		}
		want := evidence.LockBinding{ReportDigest: res.ReportDigest, ManifestDigest: res.ManifestDigest,
			CatalogDigest: res.CatalogDigest, CatalogCommit: res.CatalogCommit, ReleaseSet: res.ReleaseSet,
			ReleaseVersion: res.ReleaseVersion}
		if r.lock != want {
			return "", refuse.New(CodeLock, "recorded lock binding differs from what the lock verifier derives")
		}
		if res.ManifestDigest != r.manifest.Digest {
			return "", refuse.New(CodeLock, "lock report binds manifest %s, the stored manifest is %s", res.ManifestDigest, r.manifest.Digest)
		}
		r.lockResult = res
		return fmt.Sprintf("release %s, %d resources, %d image authorities, report %s", res.ReleaseVersion, len(res.Objects), len(res.Authorities), res.ReportDigest), nil
	})
}

// commandRecord reads a command record once: the record's own rules (canonical, schema, closed
// shape), then the ceremony's parser over the same bytes, whose identity must be the record's name.
func (a *auditor) commandRecord(d evidence.Descriptor) (*command.Parsed, error) {
	b, err := a.blob(d, evidence.MediaTypeCommand)
	if err != nil {
		return nil, err
	}
	var c evidence.Command
	if err := evidence.DecodeRecord(evidence.MediaTypeCommand, b, &c); err != nil {
		return nil, err
	}
	pc, err := command.Parse(b)
	if err != nil {
		return nil, err
	}
	if pc.Digest != d.Digest {
		return nil, refuse.New(CodeCommand, "command record %s re-canonicalizes to %s", d.Digest, pc.Digest)
	}
	return pc, nil
}
