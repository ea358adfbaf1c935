package evidence

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cyberphone/json-canonicalization/go/src/webpki.org/jsoncanonicalizer"
	"github.com/qinglong/ql3/refuse"
)

func TestCanonicalizeRFC8785Examples(t *testing.T) {
	for _, name := range []string{"values", "sorting"} {
		in, err := os.ReadFile(filepath.Join("testdata", "rfc8785", name+".in.json"))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join("testdata", "rfc8785", name+".out.json"))
		if err != nil {
			t.Fatal(err)
		}
		got, err := Canonicalize(in)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s:\n got %s\nwant %s", name, got, want)
		}
	}
}

func TestCanonicalizeRFC8785Numbers(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "rfc8785", "numbers.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		hexBits, want, ok := strings.Cut(line, " ")
		if !ok {
			t.Fatalf("bad vector line %q", line)
		}
		raw, err := hex.DecodeString(hexBits)
		if err != nil {
			t.Fatal(err)
		}
		fl := math.Float64frombits(binary.BigEndian.Uint64(raw))
		in := strconv.FormatFloat(fl, 'g', -1, 64)
		got, err := Canonicalize([]byte(in))
		if err != nil {
			t.Errorf("%s (%s): %v", hexBits, in, err)
			continue
		}
		if string(got) != want {
			t.Errorf("%s (%s): got %s want %s", hexBits, in, got, want)
		}
		n++
	}
	if n != 24 {
		t.Fatalf("ran %d number vectors, want 24", n)
	}
}

func TestCanonicalizeAccepts(t *testing.T) {
	vectors := []struct {
		in   string // JSON text
		want string // its RFC 8785 form
	}{
		{` {"b":1, "a" : [ 2 , {"d":true,"c":null} ] } `, `{"a":[2,{"c":null,"d":true}],"b":1}`},
		{`"\u00e9\/\t"`, `"é/\t"`},
		{`-0`, `0`},
		{`1E2`, `100`},
		{`1e-400`, `0`},
		{`[]`, `[]`},
		{`{}`, `{}`},
		{`"\ud83d\ude00"`, `"😀"`},
		{`{"\ue000":1,"\ud800\udc00":2}`, "{\"\U00010000\":2,\"\ue000\":1}"}, // UTF-16 order, not code points
		{strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth), strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth)},
	}
	for _, v := range vectors {
		got, err := Canonicalize([]byte(v.in))
		if err != nil {
			t.Errorf("%q: %v", v.in, err)
			continue
		}
		if string(got) != v.want {
			t.Errorf("%q: got %s want %s", v.in, got, v.want)
		}
	}
}

func TestCanonicalizeRefuses(t *testing.T) {
	vectors := []struct {
		name string      // what the case shows
		in   string      // JSON text (may be invalid)
		code refuse.Code // reason code Canonicalize must return
	}{
		{"empty", ``, CodeInvalidJSON},
		{"whitespace only", "  \n", CodeInvalidJSON},
		{"trailing data", `{} {}`, CodeInvalidJSON},
		{"trailing comma array", `[1,]`, CodeInvalidJSON},
		{"trailing comma object", `{"a":1,}`, CodeInvalidJSON},
		{"unquoted key", `{a:1}`, CodeInvalidJSON},
		{"single quotes", `'a'`, CodeInvalidJSON},
		{"unterminated string", `"abc`, CodeInvalidJSON},
		{"raw control char", "\"a\x01b\"", CodeInvalidJSON},
		{"bad escape", `"\x41"`, CodeInvalidJSON},
		{"bad unicode escape", `"\u12g4"`, CodeInvalidJSON},
		{"truncated unicode escape", `"\u12"`, CodeInvalidJSON},
		{"bom", "\ufeff{}", CodeInvalidJSON},
		{"comment", `{} // x`, CodeInvalidJSON},
		{"True", `True`, CodeInvalidJSON},
		{"nul", `nul`, CodeInvalidJSON},
		{"form feed whitespace", "\f1", CodeInvalidJSON},
		{"missing colon", `{"a" 1}`, CodeInvalidJSON},
		{"unclosed array", `[1`, CodeInvalidJSON},
		{"unclosed object", `{"a":1`, CodeInvalidJSON},
		{"leading zero", `01`, CodeInvalidNumber},
		{"leading zero negative", `-01`, CodeInvalidNumber},
		{"leading zeros in array", `[00]`, CodeInvalidNumber},
		{"leading plus", `+1`, CodeInvalidNumber},
		{"leading dot", `.5`, CodeInvalidNumber},
		{"trailing dot", `1.`, CodeInvalidNumber},
		{"trailing dot exp", `1.e5`, CodeInvalidNumber},
		{"hex", `0x10`, CodeInvalidNumber},
		{"hex in array", `[0x1F]`, CodeInvalidNumber},
		{"NaN", `NaN`, CodeInvalidNumber},
		{"Infinity", `Infinity`, CodeInvalidNumber},
		{"-Infinity", `-Infinity`, CodeInvalidNumber},
		{"bare minus", `-`, CodeInvalidNumber},
		{"empty exponent", `1e`, CodeInvalidNumber},
		{"signed empty exponent", `1e+`, CodeInvalidNumber},
		{"double dot", `1.2.3`, CodeInvalidNumber},
		{"overflow", `1e400`, CodeInvalidNumber},
		{"overflow negative", `-1e309`, CodeInvalidNumber},
		{"overflow long", `[` + strings.Repeat("9", 400) + `]`, CodeInvalidNumber},
		{"number suffix", `1x`, CodeInvalidNumber},
		{"invalid utf8 in string", "\"\xff\"", CodeInvalidUTF8},
		{"truncated utf8", "\"\xc3\"", CodeInvalidUTF8},
		{"overlong utf8", "\"\xc0\xaf\"", CodeInvalidUTF8},
		{"encoded surrogate utf8", "\"\xed\xa0\x80\"", CodeInvalidUTF8},
		{"invalid utf8 outside string", "[\xff]", CodeInvalidUTF8},
		{"lone high", `"\ud800"`, CodeLoneSurrogate},
		{"lone high then char", `"\ud800x"`, CodeLoneSurrogate},
		{"lone low", `"\udc00"`, CodeLoneSurrogate},
		{"reversed pair", `"\udc00\ud800"`, CodeLoneSurrogate},
		{"high high", `"\ud800\ud800"`, CodeLoneSurrogate},
		{"high then bmp escape", `"\ud800\u0041"`, CodeLoneSurrogate},
		{"high then simple escape", `"\ud800\n"`, CodeLoneSurrogate},
		{"lone surrogate in key", `{"\udfff":1}`, CodeLoneSurrogate},
		{"duplicate key", `{"a":1,"a":2}`, CodeDuplicateKey},
		{"duplicate key escaped", `{"a":1,"\u0061":2}`, CodeDuplicateKey},
		{"duplicate key surrogate pair vs raw", "{\"\\ud83d\\ude00\":1,\"\U0001F600\":2}", CodeDuplicateKey},
		{"duplicate key nested", `[{"x":{"k":1,"k":1}}]`, CodeDuplicateKey},
		{"duplicate key solidus", `{"/":1,"\/":2}`, CodeDuplicateKey},
		{"too deep array", strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1), CodeTooDeep},
		{"too deep object", strings.Repeat(`{"a":`, MaxDepth+1) + "1" + strings.Repeat("}", MaxDepth+1), CodeTooDeep},
		{"too deep unterminated", strings.Repeat("[", 100000), CodeTooDeep},
		{"too large", `"` + strings.Repeat("a", MaxInputBytes) + `"`, CodeTooLarge},
	}
	for _, v := range vectors {
		_, err := Canonicalize([]byte(v.in))
		if got := refuse.CodeOf(err); got != v.code {
			t.Errorf("%s: code %q (%v), want %q", v.name, got, err, v.code)
		}
	}
}

// TestCanonicalizeMatchesLibrary checks that splitting the work (our ordering, the library's
// serialization) gives exactly the library's whole-document output on inputs it handles right.
func TestCanonicalizeMatchesLibrary(t *testing.T) {
	for _, in := range canonicalizeSeeds() {
		if msg := diffLibrary([]byte(in)); msg != "" {
			t.Errorf("%q: %s", in, msg)
		}
	}
}

// diffLibrary compares our output with the library's on the input wrapped in an array (the library
// refuses top-level scalars, which RFC 8785 allows). It returns "" when they agree or we refuse.
func diffLibrary(in []byte) string {
	wrapped := append(append([]byte("["), in...), ']')
	ours, err := Canonicalize(wrapped)
	if err != nil {
		return ""
	}
	lib, err := jsoncanonicalizer.Transform(wrapped)
	if err != nil {
		return "library refused what we accepted: " + err.Error()
	}
	if !bytes.Equal(ours, lib) {
		return "ours " + string(ours) + " library " + string(lib)
	}
	return ""
}

func canonicalizeSeeds() []string {
	seeds := []string{
		`{"b":[1,2.5,-3e-7,"x"],"a":{"z":null,"y":true,"\u00e9":"\u20ac"}}`,
		`[1e21,1e-7,123456789012345678901234567890,0.1,-0.0]`,
		`"\"\\\/\b\f\n\r\t\u0000\u001f\u007f\u2028"`,
		`{"\ud83d\ude00":1,"\ufb33":2,"\u0080":3,"\r":4}`,
		`true`, `null`, `0`, `[]`, `{}`,
		// Literals with and without escapes interleaved: those without keep their bytes, the
		// others go through the library, and each must come back to its own place.
		`["a","\n","b","c\u0041","","\/","` + "\u00e9" + `\t","x` + "\u2028\x7f" + `",{"k\"":"v","k":"v\\","\u006b2":""},"z"]`,
		`{"\u0062":"\n","a":"plain","c":["\r","s","\ud83d\ude00","t"],"d":""}`,
		`["\b","\f","\u001f"]`, "[\"plain\",\"\u00e9\",\"\U0001F600\",\"\"]",
	}
	for _, name := range []string{"values", "sorting"} {
		if b, err := os.ReadFile(filepath.Join("testdata", "rfc8785", name+".in.json")); err == nil {
			seeds = append(seeds, string(b))
		}
	}
	return seeds
}

func FuzzCanonicalize(f *testing.F) {
	for _, s := range canonicalizeSeeds() {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := Canonicalize(in)
		if verr := Validate(in); refuse.CodeOf(verr) != refuse.CodeOf(err) {
			t.Fatalf("Validate %v, Canonicalize %v", verr, err)
		}
		if err != nil {
			if refuse.CodeOf(err) == "" || refuse.CodeOf(err) == CodeCanonicalize {
				t.Fatalf("refusal without a proper code: %v", err)
			}
			return
		}
		again, err := Canonicalize(out)
		if err != nil {
			t.Fatalf("canonical output refused: %v", err)
		}
		if !bytes.Equal(again, out) {
			t.Fatalf("not idempotent: %s then %s", out, again)
		}
		if len(in) < 4096 {
			if msg := diffLibrary(in); msg != "" {
				t.Fatal(msg)
			}
		}
		a, _, err := parseStrict(in)
		if err != nil {
			t.Fatal(err)
		}
		b, _, err := parseStrict(out)
		if err != nil {
			t.Fatal(err)
		}
		if !equalJSON(a, b) {
			t.Fatalf("output %s is not the same json as the input", out)
		}
	})
}

// TestValidateAgreesWithCanonicalize: Validate accepts exactly what Canonicalize accepts, with
// the same reason code (FuzzCanonicalize checks the same property on every input it tries).
func TestValidateAgreesWithCanonicalize(t *testing.T) {
	ins := append(canonicalizeSeeds(), `01`, `+1`, `.5`, `1.`, `0x10`, `NaN`, `1e400`, `"\ud800"`, `"\udc00x"`,
		"\xff", `[1,]`, `{"a":1}x`, strings.Repeat("[", MaxDepth+1)+strings.Repeat("]", MaxDepth+1),
		`{"a":1,"\u0061":2}`, `{"a":{"b":1,"b":2}}`, `[{"x":1},{"x":1,"\u0078":2}]`, `{"a":1,"b":[1,2,{"c":null}]}`)
	for _, in := range ins {
		_, cerr := Canonicalize([]byte(in))
		verr := Validate([]byte(in))
		if refuse.CodeOf(cerr) != refuse.CodeOf(verr) {
			t.Errorf("%q: Canonicalize %v, Validate %v", in, cerr, verr)
		}
	}
}

// TestDuplicateKeyEitherWay holds the duplicate check that Validate and DecodeJSON make (pairwise
// for a few members, a set for more) to the canonical sort's: every object with one name repeated
// at any two positions, at sizes on both sides of the switch, is refused naming the same key as
// Canonicalize (which sorts every object) names; distinct names that only look alike pass.
func TestDuplicateKeyEitherWay(t *testing.T) {
	for _, size := range []int{2, 3, 15, 16, 17, 40} {
		for i := range size {
			for j := i + 1; j < size; j++ {
				names := make([]string, size)
				for k := range names {
					names[k] = fmt.Sprintf(`"k%03d"`, k)
				}
				names[j] = fmt.Sprintf(`"k\u0030%02d"`, i) // names[i], its first digit escaped
				checkDuplicateRefusal(t, objectOf(names))
			}
		}
		// Two names repeated: the refusal names the one first in canonical order, as the sort does.
		names := make([]string, size+3)
		for k := range size {
			names[k] = fmt.Sprintf(`"m%03d"`, size-k)
		}
		names[size], names[size+1], names[size+2] = `"z"`, names[size-1], `"z"`
		checkDuplicateRefusal(t, objectOf(names))
	}
	for _, ok := range []string{
		`{"e\u0301":1,"\u00e9":2}`, `{"a":1,"A":2,"a ":3,"\u0000a":4}`, `{"\ud83d\ude00":1,"\ud83d\ude01":2}`,
	} {
		if err := Validate([]byte(ok)); err != nil {
			t.Errorf("Validate(%s) = %v, want nil", ok, err)
		}
		if _, err := DecodeJSON([]byte(ok)); err != nil {
			t.Errorf("DecodeJSON(%s) = %v, want nil", ok, err)
		}
	}
}

func objectOf(names []string) []byte {
	var b strings.Builder
	b.WriteByte('{')
	for k, n := range names {
		if k > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s:%d", n, k)
	}
	b.WriteByte('}')
	return []byte(b.String())
}

func checkDuplicateRefusal(t *testing.T, doc []byte) {
	t.Helper()
	_, cerr := Canonicalize(doc)
	verr := Validate(doc)
	_, derr := DecodeJSON(doc)
	for _, err := range []error{cerr, verr, derr} {
		if refuse.CodeOf(err) != CodeDuplicateKey {
			t.Fatalf("%s: %v, want %s", doc, err, CodeDuplicateKey)
		}
		if err.Error() != cerr.Error() {
			t.Fatalf("%s: %q, Canonicalize says %q", doc, err, cerr)
		}
	}
}
