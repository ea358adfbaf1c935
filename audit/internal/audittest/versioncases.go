package audittest

import (
	"bytes"
	"slices"

	"github.com/qinglong/ql3/audit"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/verdict/argv"
)

// xVersion is the version read's position in a preflight report written since it was added
// (identity, version, dry-run).
const xVersion = 1

// preflightDryRun is the preflight report's dry-run: its last exec, in reports written before the
// version read and since.
func preflightDryRun(f *Forger, fx *Fixture) evidence.Descriptor {
	execs := Rec[evidence.Preflight](f, fx.Roots.Preflight).Execs
	return execs[len(execs)-1]
}

// VersionCases are the rewrite cases of a preflight report that holds the version read and its
// versions member (a fixture of real ceremonies since the version read: audit/livetest). The
// committed fixture's preflight reports were written before it, and pass under the rule for those
// (OldPreflightCases).
func VersionCases() []Rewrite {
	return []Rewrite{
		{"versions: minorsApart one more", audit.CodeVersions, preflightEdit(func(p *evidence.Preflight) { p.Versions.MinorsApart++ })},
		{"versions: supportedSkew flipped", audit.CodeVersions, preflightEdit(func(p *evidence.Preflight) { p.Versions.SupportedSkew = !p.Versions.SupportedSkew })},
		{"versions: another API server version", audit.CodeVersions, preflightEdit(func(p *evidence.Preflight) { p.Versions.Server = "v1.30.0" })},
		{"versions: another kubectl version", audit.CodeVersions, preflightEdit(func(p *evidence.Preflight) { p.Versions.Kubectl += "-x" })},
		{"versions: member removed, the version read kept", audit.CodeExecSequence, preflightEdit(func(p *evidence.Preflight) { p.Versions = nil })},
		{"versions: the version read removed, the member kept", audit.CodeExecSequence, preflightEdit(func(p *evidence.Preflight) {
			p.Execs = slices.Delete(p.Execs, xVersion, xVersion+1)
		})},
		{"versions: the version read after the dry-run", audit.CodeExecSequence, preflightEdit(func(p *evidence.Preflight) {
			p.Execs[xVersion], p.Execs[xVersion+1] = p.Execs[xVersion+1], p.Execs[xVersion]
		})},
		{"versions: the stored read shows another API server", audit.CodeVersions, stdoutEdit(true, xVersion, func(f *Forger, fx *Fixture, out []byte) []byte {
			s := Rec[evidence.Preflight](f, fx.Roots.Preflight).Versions.Server
			i := bytes.LastIndex(out, []byte(`"gitVersion": "`+s+`"`))
			return append(append(slices.Clone(out[:i]), `"gitVersion": "`+s+`-other"`...), out[i+len(`"gitVersion": "`+s+`"`):]...)
		})},
		{"versions: the stored read without serverVersion", audit.CodeVersions, stdoutEdit(true, xVersion, func(f *Forger, fx *Fixture, out []byte) []byte {
			return bytes.Replace(out, []byte(`"serverVersion"`), []byte(`"serverVersionX"`), 1)
		})},
		{"versions: the stored read is garbage", audit.CodeVersions, stdoutEdit(true, xVersion, func(f *Forger, fx *Fixture, out []byte) []byte {
			return []byte("Client Version: v1.37.2\n")
		})},
		{"versions: the version read with --client", argv.CodeArgvShape, func(f *Forger, fx *Fixture) evidence.Descriptor {
			Edit(f, Rec[evidence.Preflight](f, fx.Roots.Preflight).Execs[xVersion], func(e *evidence.Exec) {
				e.Argv = slices.Insert(e.Argv, len(e.Argv)-1, "--client")
			})
			return f.Rewrite(fx.Roots.Preflight)
		}},
		{"versions: the version read exited 1", audit.CodeExecExit, func(f *Forger, fx *Fixture) evidence.Descriptor {
			Edit(f, Rec[evidence.Preflight](f, fx.Roots.Preflight).Execs[xVersion], func(e *evidence.Exec) { e.ExitCode = 1 })
			return f.Rewrite(fx.Roots.Preflight)
		}},
	}
}

// OldPreflightCases are rewrite cases of a preflight report written before the version read (the
// committed fixture): given a versions member, it must hold the version read it does not have.
func OldPreflightCases() []Rewrite {
	return []Rewrite{
		{"old preflight: a versions member added", audit.CodeExecSequence, preflightEdit(func(p *evidence.Preflight) {
			p.Versions = &evidence.Versions{Kubectl: "v1.34.3", Server: "v1.34.3", SupportedSkew: true}
		})},
	}
}
