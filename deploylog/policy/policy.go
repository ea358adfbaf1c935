// Package policy reads C2SP tlog-policy files (which logs sign checkpoints, which witnesses
// cosign them, and the quorum of cosignatures a checkpoint needs) and judges a signed checkpoint
// against one: the log's signature, each Ed25519 tlog-cosignature/v1 cosignature, the quorum.
// It is pure (no network, no exec, no files): the offline auditor and `ql3 log verify` import it.
// docs/log.md ("Witnesses and policy") states the accepted format and every code.
package policy

import (
	"bytes"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"

	"github.com/qinglong/ql3/refuse"
)

// Reason codes raised by this package.
const (
	CodeMalformed          refuse.Code = "POLICY_MALFORMED"           // a policy file breaks the tlog-policy syntax or rules
	CodeKey                refuse.Code = "POLICY_KEY"                 // a verifier key is not a valid key of the type its role needs
	CodeLogSignature       refuse.Code = "POLICY_LOG_SIGNATURE"       // a checkpoint has no valid signature of a policy log whose name is its origin
	CodeNoteMalformed      refuse.Code = "POLICY_NOTE_MALFORMED"      // a signed checkpoint is not a well-formed note
	CodeCosignatureInvalid refuse.Code = "POLICY_COSIGNATURE_INVALID" // a cosignature line carries a policy witness's name and key ID but does not verify
	CodeQuorum             refuse.Code = "POLICY_QUORUM"              // the valid cosignatures do not meet the policy's quorum
)

// Limits on what Parse accepts; the spec asks for at least 32 of each.
const (
	MaxPolicySize = 64 << 10
	MaxLogs       = 256
	MaxWitnesses  = 256
	MaxGroups     = 256
)

// None is the predefined quorum name that requires no cosignature.
const None = "none"

// Policy is a parsed tlog-policy file.
type Policy struct {
	Logs      []Log
	Witnesses []Witness
	Groups    []Group
	Quorum    string // a witness's or group's name, or None
}

// Log is a `log <vkey> [<url>]` line.
type Log struct {
	VKey     string
	URL      string
	Verifier note.Verifier
}

// Witness is a `witness <name> <vkey> [<url>]` line.
type Witness struct {
	Name     string
	VKey     string
	URL      string
	Verifier *CosignatureVerifier
}

// Group is a `group <name> <all|any|k> <member>...` line, Threshold resolved to k.
type Group struct {
	Name      string
	Threshold int
	Members   []string
}

// Parse reads a policy file strictly: every rule of c2sp.org/tlog-policy is checked (names
// defined before use, one quorum line, 1 <= k <= n, no duplicate key or name or member, only
// tab, newline and printable or high-bit octets); a violation is POLICY_MALFORMED naming its
// line, a bad key POLICY_KEY. A missing final newline is accepted.
func Parse(text []byte) (*Policy, error) {
	if len(text) > MaxPolicySize {
		return nil, refuse.New(CodeMalformed, "policy of %d bytes exceeds %d", len(text), MaxPolicySize)
	}
	for i, c := range text {
		if c < 0x20 && c != '\t' && c != '\n' || c == 0x7f {
			return nil, refuse.New(CodeMalformed, "policy byte %d is the control character 0x%02x", i, c)
		}
	}
	p := &Policy{}
	defined := map[string]bool{None: true} // witnesses and groups share one namespace
	logKeys := map[string]bool{}
	witnessKeys := map[string]bool{}
	quorumSeen := false
	lines := bytes.Split(text, []byte("\n"))
	for i, raw := range lines {
		n := i + 1
		bad := func(format string, args ...any) (*Policy, error) {
			return nil, refuse.New(CodeMalformed, "policy line %d: "+format, append([]any{n}, args...)...)
		}
		fields := strings.FieldsFunc(string(raw), func(r rune) bool { return r == ' ' || r == '\t' })
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		switch kw, args := fields[0], fields[1:]; kw {
		case "log":
			if len(args) < 1 || len(args) > 2 {
				return bad("log takes a key and an optional URL")
			}
			if len(p.Logs) == MaxLogs {
				return bad("more than %d logs", MaxLogs)
			}
			v, key, err := newLogVerifier(args[0])
			if err != nil {
				return nil, refuse.Wrap(CodeKey, err, "policy line %d", n)
			}
			if logKeys[string(key)] {
				return bad("log %s repeats the key of an earlier log", refuse.Ident(v.Name()))
			}
			logKeys[string(key)] = true
			p.Logs = append(p.Logs, Log{VKey: args[0], URL: at(args, 1), Verifier: v})
		case "witness":
			if len(args) < 2 || len(args) > 3 {
				return bad("witness takes a name, a key and an optional URL")
			}
			if len(p.Witnesses) == MaxWitnesses {
				return bad("more than %d witnesses", MaxWitnesses)
			}
			if defined[args[0]] {
				return bad("the name %s is already defined", refuse.Ident(args[0]))
			}
			v, err := NewCosignatureVerifier(args[1])
			if err != nil {
				return nil, refuse.Wrap(CodeKey, err, "policy line %d", n)
			}
			if witnessKeys[string(v.key)] {
				return bad("witness %s repeats the key of an earlier witness", refuse.Ident(args[0]))
			}
			witnessKeys[string(v.key)] = true
			defined[args[0]] = true
			p.Witnesses = append(p.Witnesses, Witness{Name: args[0], VKey: args[1], URL: at(args, 2), Verifier: v})
		case "group":
			if len(args) < 3 {
				return bad("group takes a name, a threshold and at least one member")
			}
			if len(p.Groups) == MaxGroups {
				return bad("more than %d groups", MaxGroups)
			}
			name, members := args[0], args[2:]
			if defined[name] {
				return bad("the name %s is already defined", refuse.Ident(name))
			}
			listed := map[string]bool{}
			for _, m := range members {
				switch {
				case m == None:
					return bad("none cannot be a group member")
				case !defined[m]:
					return bad("member %s is not defined on an earlier line", refuse.Ident(m))
				case listed[m]:
					return bad("member %s is listed twice", refuse.Ident(m))
				}
				listed[m] = true
			}
			k, ok := threshold(args[1], len(members))
			if !ok {
				return bad("threshold %s is not all, any or a decimal from 1 to %d", refuse.Ident(args[1]), len(members))
			}
			defined[name] = true
			p.Groups = append(p.Groups, Group{Name: name, Threshold: k, Members: members})
		case "quorum":
			if len(args) != 1 {
				return bad("quorum takes one name")
			}
			if quorumSeen {
				return bad("a second quorum line")
			}
			if !defined[args[0]] {
				return bad("quorum %s is not defined on an earlier line", refuse.Ident(args[0]))
			}
			quorumSeen = true
			p.Quorum = args[0]
		default:
			return bad("unknown keyword %s", refuse.Ident(kw))
		}
	}
	if !quorumSeen {
		return nil, refuse.New(CodeMalformed, "policy has no quorum line")
	}
	return p, nil
}

// threshold resolves all, any or a canonical decimal k with 1 <= k <= n.
func threshold(s string, n int) (int, bool) {
	switch s {
	case "all":
		return n, true
	case "any":
		return 1, true
	}
	k, err := strconv.Atoi(s)
	if err != nil || k < 1 || k > n || strconv.Itoa(k) != s {
		return 0, false
	}
	return k, true
}

func at(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return ""
}

// Marshal writes the policy in the canonical form Parse reads back to an equal policy: logs,
// witnesses, groups (thresholds as decimals), then the quorum.
func (p *Policy) Marshal() []byte {
	var b strings.Builder
	line := func(f ...string) {
		for i := len(f) - 1; i >= 0 && f[i] == ""; i-- {
			f = f[:i]
		}
		b.WriteString(strings.Join(f, " ") + "\n")
	}
	for _, l := range p.Logs {
		line("log", l.VKey, l.URL)
	}
	for _, w := range p.Witnesses {
		line("witness", w.Name, w.VKey, w.URL)
	}
	for _, g := range p.Groups {
		line(append([]string{"group", g.Name, strconv.Itoa(g.Threshold)}, g.Members...)...)
	}
	line("quorum", p.Quorum)
	return []byte(b.String())
}

// Witness returns the policy witness named name.
func (p *Policy) Witness(name string) (Witness, bool) {
	for _, w := range p.Witnesses {
		if w.Name == name {
			return w, true
		}
	}
	return Witness{}, false
}

// witnessFor returns the witness whose cosignature lines carry name and key ID hash.
func (p *Policy) witnessFor(name string, hash uint32) (Witness, bool) {
	for _, w := range p.Witnesses {
		if w.Verifier.name == name && w.Verifier.hash == hash {
			return w, true
		}
	}
	return Witness{}, false
}
