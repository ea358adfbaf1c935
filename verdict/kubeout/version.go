package kubeout

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
)

// CodeVersionRead: the preflight's version read (kubectl version -o=json) exited non-zero with a
// stderr that names no known cause, or its output is not exactly kubectl's and the API server's
// version: not strict JSON, no serverVersion (kubectl printed its own version only), a gitVersion
// that is not vMAJOR.MINOR.PATCH, a major or minor member that disagrees with it, different majors.
const CodeVersionRead refuse.Code = "VERSION_READ_FAILED"

// MaxVersionOutput bounds the version read's stdout; kubectl prints well under 2 KiB.
const MaxVersionOutput = 64 << 10

var (
	// reGitVersion is a release's gitVersion: vMAJOR.MINOR.PATCH, then optionally a pre-release or
	// build suffix as managed clusters carry it (v1.37.2-eks-4f2a1c3, v1.37.2-gke.1200). Bounded,
	// and of identifier characters only, so that it can be printed as it is.
	reGitVersion = regexp.MustCompile(`^v(0|[1-9][0-9]{0,5})\.(0|[1-9][0-9]{0,5})\.(0|[1-9][0-9]{0,5})(?:[-+][0-9A-Za-z][0-9A-Za-z.+-]{0,63})?$`)
	// reMajor and reMinor are the major and minor members: decimal, no leading zero; a minor may
	// end in "+", which Kubernetes' build adds when gitVersion has a suffix (a managed cluster's
	// API server reports minor "37+").
	reMajor = regexp.MustCompile(`^(0|[1-9][0-9]{0,5})$`)
	reMinor = regexp.MustCompile(`^(0|[1-9][0-9]{0,5})\+?$`)
)

// members decodes a JSON object into its members by their exact names: encoding/json matches
// struct fields case-insensitively, which would let a "ServerVersion" member stand in for
// "serverVersion" (evidence.Validate refuses only exact duplicates).
func members(b []byte) (map[string]json.RawMessage, bool) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil || m == nil {
		return nil, false
	}
	return m, true
}

// ReadVersions returns the versions that `kubectl version -o=json` printed: kubectl's
// (clientVersion) and the API server's (serverVersion), how many minors apart they are and
// whether that is within evidence.SupportedSkew. The output must be one strictly valid JSON
// object (no duplicate keys, nothing after it) with both members; each one's gitVersion must be
// vMAJOR.MINOR.PATCH[suffix] and its major and minor members must be those numbers.
func ReadVersions(stdout []byte) (*evidence.Versions, error) {
	if len(stdout) > MaxVersionOutput {
		return nil, refuse.New(CodeVersionRead, "version read printed %d bytes, more than %d", len(stdout), MaxVersionOutput)
	}
	if err := evidence.Validate(stdout); err != nil {
		return nil, refuse.Wrap(CodeVersionRead, err, "version read output is not strict json")
	}
	top, ok := members(stdout)
	if !ok {
		return nil, refuse.New(CodeVersionRead, "version read output is not a json object")
	}
	if top["clientVersion"] == nil {
		return nil, refuse.New(CodeVersionRead, "version read output has no clientVersion")
	}
	if top["serverVersion"] == nil {
		return nil, refuse.New(CodeVersionRead, "version read output has no serverVersion: kubectl did not learn the API server's version")
	}
	cv, cMajor, cMinor, err := readVersion("clientVersion", top["clientVersion"])
	if err != nil {
		return nil, err
	}
	sv, sMajor, sMinor, err := readVersion("serverVersion", top["serverVersion"])
	if err != nil {
		return nil, err
	}
	if cMajor != sMajor {
		return nil, refuse.New(CodeVersionRead, "kubectl %s and API server %s differ in major version: no minor skew to judge", cv, sv)
	}
	apart := cMinor - sMinor
	if apart < 0 {
		apart = -apart
	}
	return &evidence.Versions{Kubectl: cv, Server: sv, MinorsApart: apart, SupportedSkew: apart <= evidence.SupportedSkew}, nil
}

// readVersion checks one version.Info and returns its gitVersion, major and minor. Its other
// members (gitCommit, buildDate, the server's emulation and compatibility versions) are not judged.
func readVersion(member string, raw json.RawMessage) (string, int64, int64, error) {
	fields, ok := members(raw)
	if !ok {
		return "", 0, 0, refuse.New(CodeVersionRead, "version read output: %s is not a json object", member)
	}
	var major, minor, git string
	for _, f := range []struct {
		name string
		to   *string
	}{{"major", &major}, {"minor", &minor}, {"gitVersion", &git}} {
		if fields[f.name] == nil || json.Unmarshal(fields[f.name], f.to) != nil {
			return "", 0, 0, refuse.New(CodeVersionRead, "version read output: %s.%s is missing or not a string", member, f.name)
		}
	}
	m := reGitVersion.FindStringSubmatch(git)
	if m == nil {
		return "", 0, 0, refuse.New(CodeVersionRead, "version read output: %s.gitVersion %s is not vMAJOR.MINOR.PATCH", member, refuse.Ident(git))
	}
	if !reMajor.MatchString(major) || !reMinor.MatchString(minor) {
		return "", 0, 0, refuse.New(CodeVersionRead, "version read output: %s major %s or minor %s is not a decimal number", member, refuse.Ident(major), refuse.Ident(minor))
	}
	if major != m[1] || strings.TrimSuffix(minor, "+") != m[2] {
		return "", 0, 0, refuse.New(CodeVersionRead, "version read output: %s major %s, minor %s disagree with gitVersion %s", member, refuse.Ident(major), refuse.Ident(minor), git)
	}
	ma, _ := strconv.ParseInt(m[1], 10, 64) // at most six digits: reGitVersion
	mi, _ := strconv.ParseInt(m[2], 10, 64)
	return git, ma, mi, nil
}
