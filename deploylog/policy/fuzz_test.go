package policy

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"
)

// The fuzzers' seed corpora are committed under testdata/fuzz/<Fuzzer>/ (written by
// TestWriteFuzzSeeds with QL3_WRITE_SEEDS=1); TestFuzzSeedsExist keeps them from going missing.
// The seeds hold only public keys, derived from fixed seeds so that a rewrite is stable.
var fuzzers = []string{"FuzzParse", "FuzzEvaluate"}

// FuzzParse: whatever parses marshals to a policy that parses to the same marshalling, and
// keeps its counts.
func FuzzParse(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Parse(b)
		if err != nil {
			return
		}
		again, err := Parse(p.Marshal())
		if err != nil {
			t.Fatalf("marshalled policy does not parse: %v\n%s", err, p.Marshal())
		}
		if string(again.Marshal()) != string(p.Marshal()) || len(again.Groups) != len(p.Groups) || len(again.Witnesses) != len(p.Witnesses) {
			t.Fatalf("marshal is not stable")
		}
	})
}

// FuzzEvaluate: no note passes the log check under a policy whose log key did not sign it,
// unless it is one of the seeds fixedKeys signed; evaluation never panics.
func FuzzEvaluate(f *testing.F) {
	p := fixedPolicy(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := p.Evaluate(b)
		if err != nil {
			return
		}
		if r.Origin != "example.com/fuzz-log" || r.Log != r.Origin {
			t.Fatalf("accepted a checkpoint of %q signed by %q", r.Origin, r.Log)
		}
		if len(r.Cosigned) > len(p.Witnesses) {
			t.Fatalf("%d cosignatures from %d witnesses", len(r.Cosigned), len(p.Witnesses))
		}
	})
}

// fixedKey derives a key from a label, for seeds that must not change between runs.
func fixedKey(label string) ed25519.PrivateKey {
	s := sha256.Sum256([]byte("ql3 policy fuzz seed " + label))
	return ed25519.NewKeyFromSeed(s[:])
}

func fixedWitness(t testing.TB, name string) testWitness {
	priv := fixedKey(name)
	v, err := NewCosignatureVerifierFromKey(name, priv.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	return testWitness{name: name, priv: priv, v: v}
}

func fixedLog(t testing.TB) testLog {
	origin := "example.com/fuzz-log"
	priv := fixedKey(origin)
	vkey, err := note.NewEd25519VerifierKey(origin, priv.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	// note's signer key encoding: PRIVATE+KEY+name+hash+base64(0x01 || seed).
	v, _ := note.NewVerifier(vkey)
	skey := fmt.Sprintf("PRIVATE+KEY+%s+%08x+%s", origin, v.KeyHash(), b64(append([]byte{1}, priv.Seed()...)))
	s, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	return testLog{origin: origin, s: s, vkey: vkey}
}

func fixedPolicyText(t testing.TB) string {
	l := fixedLog(t)
	ws := []testWitness{fixedWitness(t, "w1.example"), fixedWitness(t, "w2.example"), fixedWitness(t, "w3.example")}
	return policyText(l, ws, "group G 2 W1 W2 W3\ngroup H any G W3\nquorum H\n")
}

func fixedPolicy(t testing.TB) *Policy {
	p, err := Parse([]byte(fixedPolicyText(t)))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func seeds(t testing.TB) map[string][]string {
	l := fixedLog(t)
	w1, w2 := fixedWitness(t, "w1.example"), fixedWitness(t, "w2.example")
	text, signed := l.checkpoint(t, 3)
	return map[string][]string{
		"FuzzParse": {
			fixedPolicyText(t),
			"log " + l.vkey + "\nquorum none\n",
			"quorum none",
			"# only a comment\n\n\t \nquorum none\n",
			policyText(l, []testWitness{w1, w2}, "group G all W1 W2\ngroup H 1 G\nquorum H\n"),
			policyText(l, []testWitness{w1}, "group G any W1 W1\nquorum G\n"),
		},
		"FuzzEvaluate": {
			string(signed),
			string(signed) + w1.cosign(text, 1) + w2.cosign(text, 2),
			string(signed) + w1.cosign(text, 1) + "— other.example AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n",
			text,
		},
	}
}

func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("QL3_WRITE_SEEDS") != "1" {
		t.Skip("QL3_WRITE_SEEDS=1 rewrites testdata/fuzz")
	}
	for name, list := range seeds(t) {
		dir := filepath.Join("testdata", "fuzz", name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i, s := range list {
			body := "go test fuzz v1\n[]byte(" + strconv.Quote(s) + ")\n"
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", i)), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestFuzzSeedsExist(t *testing.T) {
	for _, name := range fuzzers {
		entries, err := os.ReadDir(filepath.Join("testdata", "fuzz", name))
		if err != nil || len(entries) < 2 {
			t.Errorf("%s: committed seed corpus missing (%v)", name, err)
		}
		for _, e := range entries {
			b, _ := os.ReadFile(filepath.Join("testdata", "fuzz", name, e.Name()))
			if !strings.HasPrefix(string(b), "go test fuzz v1\n") {
				t.Errorf("%s/%s is not a corpus file", name, e.Name())
			}
		}
	}
	// The seeds still parse as they were written to: a policy seed that stopped parsing would
	// leave the fuzzer starting from refusals only.
	if _, err := Parse([]byte(seeds(t)["FuzzParse"][0])); err != nil {
		t.Fatal(err)
	}
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
