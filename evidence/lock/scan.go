package lock

import (
	"github.com/qinglong/ql3/evidence/manifest"
	"github.com/qinglong/ql3/refuse"
)

// CodeUnknownAuthority: the image authority ghcr.io/qinglong appears somewhere other than the
// container image of an image-authority resource: in any other string or member name of any
// document, in a YAML comment, or through an escape that hides it from the bytes.
const CodeUnknownAuthority refuse.Code = "LOCK_UNKNOWN_AUTHORITY"

// countAuthority counts the mentions of the image authority in s: "ghcr.io" (ASCII case
// ignored, an optional trailing dot and an optional :port) followed by "/qinglong" that does not
// continue as a longer name.
func countAuthority(s string) int {
	const host, org = "ghcr.io", "/qinglong"
	n := 0
	for i := 0; i+len(host) <= len(s); i++ {
		if !foldAt(s, i, host) {
			continue
		}
		j := i + len(host)
		if j < len(s) && s[j] == '.' {
			j++
		}
		if j < len(s) && s[j] == ':' {
			j++
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
		}
		if !foldAt(s, j, org) {
			continue
		}
		if k := j + len(org); k == len(s) || !nameChar(s[k]) {
			n++
		}
	}
	return n
}

// foldAt reports whether s holds lower-case ASCII word w at i, ignoring ASCII case.
func foldAt(s string, i int, w string) bool {
	if i+len(w) > len(s) {
		return false
	}
	for k := 0; k < len(w); k++ {
		c := s[i+k]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != w[k] {
			return false
		}
	}
	return true
}

func nameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}

// scanObject refuses any mention of the authority in o's member names and strings except the
// container images of a, which checkAuthority has already proven to be the lock's references.
func scanObject(o *manifest.Object, a *Authority) error {
	return walkFields(o.Fields, func(path []string, v any) error {
		if countAuthority(path[len(path)-1]) > 0 {
			return refuse.New(CodeUnknownAuthority, "%s: a member name at %s names ghcr.io/qinglong", desc(o), render(path[:len(path)-1]))
		}
		if s, ok := v.(string); ok && countAuthority(s) > 0 && (a == nil || !isContainerImage(path, a.PodSpecPath)) {
			return refuse.New(CodeUnknownAuthority, "%s: a string at %s names ghcr.io/qinglong outside a container image of an image authority", desc(o), render(path))
		}
		return nil
	})
}

// scanRaw compares the mentions of the authority in the manifest bytes with the container
// images that carry one: more means a comment (which no reader applies but a reviewer reads),
// fewer means an image spelled with an escape.
func scanRaw(raw []byte, images int) error {
	if n := countAuthority(string(raw)); n != images {
		return refuse.New(CodeUnknownAuthority, "the manifest bytes name ghcr.io/qinglong %d times, its image-authority container images %d times", n, images).
			WithHint("remove comments that name the image authority and write images without escapes")
	}
	return nil
}
