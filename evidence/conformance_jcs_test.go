package evidence

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"go/ast"
	goparser "go/parser"
	"go/token"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/qinglong/ql3/refuse"
)

// jcsModule is the canonicalizer's library module. Its own conformance data (testdata/input,
// testdata/output, testdata/outhex) is read from the module cache, where `go list -m -json` says the
// module lives, so the vectors are the library author's and never a copy that could drift.
const jcsModule = "github.com/cyberphone/json-canonicalization"

// jcsRefused lists the library's input files that ql3's strict wrapper refuses instead of
// canonicalizing, each with the reason code it must give (docs/jcs.md, "The library's own vectors").
// It is empty: every vector of the pinned version is strict JSON.
var jcsRefused = map[string]refuse.Code{}

// jcsModuleDir returns the module's directory in the module cache.
func jcsModuleDir(t *testing.T) string {
	t.Helper()
	gobin := "go"
	if p, err := exec.LookPath("go"); err == nil {
		gobin = p
	}
	out, err := exec.Command(gobin, "list", "-m", "-json", jcsModule).Output()
	if err != nil {
		// Without the go command the module directory cannot be found; that only happens when the
		// test binary runs away from its toolchain, which CI never does.
		if os.Getenv("CI") == "true" {
			t.Fatalf("conformance_jcs_test.go: go list -m -json %s: %v", jcsModule, err)
		}
		t.Skipf("conformance_jcs_test.go: go list -m -json %s: %v", jcsModule, err)
	}
	var m struct{ Dir string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		t.Fatalf("conformance_jcs_test.go: go list -m -json %s: no Dir in %q (%v); run `go mod download %s`", jcsModule, out, err, jcsModule)
	}
	return m.Dir
}

// TestConformanceJCSLibraryVectors runs every file of the library's testdata/input through
// Canonicalize and compares it byte for byte with testdata/output and with the bytes written out in
// testdata/outhex.
func TestConformanceJCSLibraryVectors(t *testing.T) {
	dir := filepath.Join(jcsModuleDir(t), "testdata")
	inputs, err := filepath.Glob(filepath.Join(dir, "input", "*.json"))
	if err != nil || len(inputs) == 0 {
		t.Fatalf("conformance_jcs_test.go: no vectors under %s (%v)", filepath.Join(dir, "input"), err)
	}
	passed := 0
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".json")
		ok := t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			got, cerr := Canonicalize(src)
			if code, refused := jcsRefused[name]; refused {
				if got := refuse.CodeOf(cerr); got != code {
					t.Fatalf("conformance_jcs_test.go: %s: want refusal %s, got %v", in, code, cerr)
				}
				return
			}
			if cerr != nil {
				t.Fatalf("conformance_jcs_test.go: %s: refused: %v", in, cerr)
			}
			want, err := os.ReadFile(filepath.Join(dir, "output", name+".json"))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("conformance_jcs_test.go: %s:\n got %s\nwant %s", in, got, want)
			}
			hexText, err := os.ReadFile(filepath.Join(dir, "outhex", name+".txt"))
			if err != nil {
				t.Fatal(err)
			}
			wantHex, err := hex.DecodeString(strings.Join(strings.Fields(string(hexText)), ""))
			if err != nil {
				t.Fatalf("conformance_jcs_test.go: outhex/%s.txt: %v", name, err)
			}
			if !bytes.Equal(got, wantHex) {
				t.Errorf("conformance_jcs_test.go: %s: output differs from outhex/%s.txt:\n got % x\nwant % x", in, name, got, wantHex)
			}
		})
		if ok {
			passed++
		}
	}
	t.Logf("conformance_jcs_test.go: %d of %d library vectors pass (%d refused by design)", passed, len(inputs), len(jcsRefused))
}

// TestConformanceJCSES6Numbers checks ql3's number serialization against the library's ES6 number
// test file, generated here as the library's testdata/numgen.go generates it (its table of fixed
// values is read from that file's source, not copied) and hashed: the SHA-256 of its first 1,000,
// 10,000 and 100,000 lines must equal the checksums in the library's testdata/README.md.
func TestConformanceJCSES6Numbers(t *testing.T) {
	dir := filepath.Join(jcsModuleDir(t), "testdata")
	static := numgenStatic(t, filepath.Join(dir, "numgen.go"))
	want := numgenChecksums(t, filepath.Join(dir, "README.md"))
	next := numgenGenerator(static)
	h := sha256.New()
	var line, lit []byte
	checked := 0
	for n := 1; n <= 100000; n++ {
		f := next()
		lit = strconv.AppendFloat(lit[:0], f, 'g', -1, 64)
		got, err := Canonicalize(lit)
		if err != nil {
			t.Fatalf("conformance_jcs_test.go: line %d (%s): refused: %v", n, lit, err)
		}
		line = strconv.AppendUint(line[:0], math.Float64bits(f), 16)
		line = append(line, ',')
		line = append(line, got...)
		line = append(line, '\n')
		h.Write(line)
		if sum, ok := want[n]; ok {
			if got := hex.EncodeToString(h.Sum(nil)); got != sum {
				t.Fatalf("conformance_jcs_test.go: ES6 number file, first %d lines: sha256 %s, README.md says %s", n, got, sum)
			}
			checked++
		}
	}
	if checked < 3 {
		t.Fatalf("conformance_jcs_test.go: only %d of the README's checksums (1000, 10000, 100000 lines) were found", checked)
	}
}

// numgenStatic reads the fixed values (the `static` array) out of numgen.go's source.
func numgenStatic(t *testing.T, path string) []uint64 {
	t.Helper()
	f, err := goparser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		t.Fatalf("conformance_jcs_test.go: %v", err)
	}
	var vals []uint64
	ast.Inspect(f, func(n ast.Node) bool {
		as, ok := n.(*ast.AssignStmt)
		if !ok || len(as.Lhs) != 1 || len(as.Rhs) != 1 {
			return true
		}
		if id, ok := as.Lhs[0].(*ast.Ident); !ok || id.Name != "static" {
			return true
		}
		cl, ok := as.Rhs[0].(*ast.CompositeLit)
		if !ok {
			return true
		}
		for _, e := range cl.Elts {
			bl, ok := e.(*ast.BasicLit)
			if !ok {
				t.Fatalf("conformance_jcs_test.go: %s: static element %T", path, e)
			}
			v, err := strconv.ParseUint(bl.Value, 0, 64)
			if err != nil {
				t.Fatalf("conformance_jcs_test.go: %s: %v", path, err)
			}
			vals = append(vals, v)
		}
		return false
	})
	if len(vals) == 0 {
		t.Fatalf("conformance_jcs_test.go: %s: no `static := [...]uint64{...}` found", path)
	}
	return vals
}

// numgenChecksums reads the README's table rows "| sha256 | lines | size |".
func numgenChecksums(t *testing.T, path string) map[int]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("conformance_jcs_test.go: %v", err)
	}
	sums := map[int]string{}
	for _, l := range strings.Split(string(b), "\n") {
		cols := strings.Split(l, "|")
		if len(cols) < 4 {
			continue
		}
		sum, lines := strings.TrimSpace(cols[1]), strings.TrimSpace(cols[2])
		n, err := strconv.Atoi(lines)
		if len(sum) == 64 && err == nil {
			sums[n] = sum
		}
	}
	return sums
}

// numgenGenerator is numgen.go's generator: the fixed values, 2000 serial subnormal-boundary values,
// then the finite non-zero doubles of a SHA-256 chain.
func numgenGenerator(static []uint64) func() float64 {
	var (
		idx   int
		data  []byte
		block [sha256.Size]byte
	)
	return func() float64 {
		const numSerial = 2000
		var f float64
		switch {
		case idx < len(static):
			f = math.Float64frombits(static[idx])
		case idx < len(static)+numSerial:
			f = math.Float64frombits(0x0010000000000000 + uint64(idx-len(static)))
		default:
			for f == 0 || math.IsNaN(f) || math.IsInf(f, 0) {
				if len(data) == 0 {
					block = sha256.Sum256(block[:])
					data = block[:]
				}
				f = math.Float64frombits(binary.LittleEndian.Uint64(data))
				data = data[8:]
			}
		}
		idx++
		return f
	}
}
