package witness

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/qinglong/ql3/deploylog/policy"
)

// The witness's answers are parsed by conflictSize (a 409's body) and cosignatures (a 200's);
// their seed corpora are committed under testdata/fuzz/<Fuzzer>/ (QL3_WRITE_SEEDS=1 rewrites
// them), and TestFuzzSeedsExist keeps them from going missing.
var fuzzers = []string{"FuzzConflictSize", "FuzzCosignatures"}

// FuzzConflictSize: a size is accepted only as its own canonical decimal line.
func FuzzConflictSize(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := conflictSize("text/x.tlog.size", b)
		if err != nil {
			return
		}
		if want := strconv.FormatInt(n, 10) + "\n"; string(b) != want {
			t.Fatalf("accepted %q as %d", b, n)
		}
	})
}

// FuzzCosignatures: no answer yields a line that is not a note signature line of the client's
// witness, and none verifies under a key that signed nothing.
func FuzzCosignatures(f *testing.F) {
	c := fuzzClient(f)
	signed := []byte("example.com/log\n1\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n\n— example.com/log AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n")
	f.Fuzz(func(t *testing.T, body []byte) {
		lines, err := c.cosignatures(body, signed)
		if err == nil {
			t.Fatalf("a fuzzed answer verifies under a key that signed nothing: %q", lines)
		}
	})
}

func fuzzClient(t testing.TB) *Client {
	s := sha256.Sum256([]byte("ql3 witness fuzz seed"))
	v, err := policy.NewCosignatureVerifierFromKey("w.example", ed25519.NewKeyFromSeed(s[:]).Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	c, err := New("http://127.0.0.1:1/", v, 0)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func seeds() map[string][]string {
	return map[string][]string{
		"FuzzConflictSize": {"0\n", "12345\n", "9223372036854775807\n", "01\n", "-1\n", "1", "1\n2\n", " 1\n"},
		"FuzzCosignatures": {
			"— w.example AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\n",
			"— other.example AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\n",
			"\n", "— \n", "hello\n",
		},
	}
}

func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("QL3_WRITE_SEEDS") != "1" {
		t.Skip("QL3_WRITE_SEEDS=1 rewrites testdata/fuzz")
	}
	for name, list := range seeds() {
		dir := filepath.Join("testdata", "fuzz", name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i, s := range list {
			body := "go test fuzz v1\n[]byte(" + strconv.Quote(s) + ")\n"
			if err := os.WriteFile(filepath.Join(dir, "seed-"+strconv.Itoa(i)), []byte(body), 0o644); err != nil {
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
			if !bytes.HasPrefix(b, []byte("go test fuzz v1\n")) || !strings.Contains(string(b), "[]byte(") {
				t.Errorf("%s/%s is not a corpus file", name, e.Name())
			}
		}
	}
}
