package audittest

import (
	"reflect"
	"regexp"
	"strings"

	"github.com/qinglong/ql3/evidence"
)

// Normalization levels of Equivalent.
const (
	// TimesOnly clears the informative times: a record differing only there must pass.
	TimesOnly = iota
	// Unverifiable also clears what docs/audit.md lists as not checkable offline: a record that
	// passes must be equal to the original after this.
	Unverifiable
)

// Equivalent reports whether mutated is a record of mediaType that decodes (canonical, its
// schema, its closed shape) to the same value as original once level's fields are cleared from
// both. Raw blobs are equivalent only when equal.
func Equivalent(mediaType string, original, mutated []byte, level int) bool {
	if _, isRecord := evidence.RecordSchema(mediaType); !isRecord {
		return string(original) == string(mutated)
	}
	a, b := newRecord(mediaType), newRecord(mediaType)
	if a == nil || evidence.DecodeRecord(mediaType, original, a) != nil || evidence.DecodeRecord(mediaType, mutated, b) != nil {
		return false
	}
	normalize(a, level)
	normalize(b, level)
	return reflect.DeepEqual(a, b)
}

func newRecord(mediaType string) any {
	switch mediaType {
	case evidence.MediaTypeCommand:
		return &evidence.Command{}
	case evidence.MediaTypeInput:
		return &evidence.Input{}
	case evidence.MediaTypeKubeconfig:
		return &evidence.KubeconfigSummary{}
	case evidence.MediaTypeExec:
		return &evidence.Exec{}
	case evidence.MediaTypePreflight:
		return &evidence.Preflight{}
	case evidence.MediaTypeIntent:
		return &evidence.Intent{}
	case evidence.MediaTypeReceipt:
		return &evidence.Receipt{}
	}
	return nil
}

// The canonical forms of the held descriptor and of MkdirTemp's directory name: only these are
// normalized, so a record that passes with another form fails the fuzz property.
var (
	fdRE  = regexp.MustCompile(`^/proc/self/fd/([3-9]|[1-9][0-9]+)$`)
	dirRE = regexp.MustCompile(`/ql3-kubectl-(0|[1-9][0-9]*)$`)
)

func normalize(v any, level int) {
	switch r := v.(type) {
	case *evidence.Exec:
		// durationMs is kubectl's run time on the monotonic clock, informative; startedAt and
		// finishedAt must keep the chain's execs in order, so only their truth is unverifiable.
		r.DurationMs = 0
		if level == Unverifiable {
			r.StartedAt, r.FinishedAt = "", ""
			// The held descriptor's number and the private run directory's name: only their
			// form (argv.CheckInvocation and the audit's argv form) and, for the directory,
			// that no other run of the chain claims it are checked.
			if len(r.Argv) > 1 {
				if fdRE.MatchString(r.Argv[0]) {
					r.Argv[0] = "/proc/self/fd/N"
				}
				if dir, ok := strings.CutSuffix(strings.TrimPrefix(r.Argv[1], "--kubeconfig="), "/kubeconfig"); ok && dirRE.MatchString(dir) {
					for i := range r.Argv {
						r.Argv[i] = strings.ReplaceAll(r.Argv[i], dir, "DIR")
					}
					for i := range r.Env {
						r.Env[i] = strings.ReplaceAll(r.Env[i], dir, "DIR")
					}
				}
			}
		}
	case *evidence.Preflight:
		// Writer, like the times, is informative: which ql3 wrote the record.
		r.StartedAt, r.FinishedAt, r.Writer = "", "", nil
	case *evidence.Receipt:
		r.StartedAt, r.FinishedAt, r.Writer = "", "", nil
	case *evidence.Intent:
		r.CreatedAt = ""
	case *evidence.Input:
		r.Mtime, r.Ctime = "", ""
		if level == Unverifiable {
			// The file's identity as read, which nothing stored can confirm; the size of the
			// files bound by digest alone; kubectl's mode and owner beyond the stable-file rules;
			// the command file's path.
			r.Dev, r.Inode = "", ""
			if r.Content == nil {
				r.Size = 0
			}
			if r.Role == evidence.RoleKubectl {
				r.Mode, r.UID = "", 0
			}
			if r.Role == evidence.RoleCommandFile {
				r.Path = "" // the command does not name its own file
			}
		}
	case *evidence.KubeconfigSummary:
		if level == Unverifiable {
			// Redacted facts of a kubeconfig whose bytes are not stored.
			r.Cluster, r.Server, r.CADigest, r.User, r.AuthKind = "", "", "", "", ""
		}
	}
}
