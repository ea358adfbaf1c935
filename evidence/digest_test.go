package evidence

import (
	"strings"
	"testing"

	"github.com/qinglong/ql3/refuse"
)

func TestParseDigest(t *testing.T) {
	good := "sha256:" + strings.Repeat("0123456789abcdef", 4)
	if d, err := ParseDigest(good); err != nil || string(d) != good {
		t.Fatalf("ParseDigest(%q) = %q, %v", good, d, err)
	}
	if d := FromBytes(nil); string(d) != "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
		t.Fatalf("FromBytes(nil) = %s", d)
	}
	vectors := []struct {
		name string // what is wrong
		in   string // candidate digest
	}{
		{"empty", ""},
		{"no algorithm", strings.Repeat("a", 64)},
		{"upper case hex", "sha256:" + strings.Repeat("A", 64)},
		{"short", "sha256:" + strings.Repeat("a", 63)},
		{"long", "sha256:" + strings.Repeat("a", 65)},
		{"non hex", "sha256:" + strings.Repeat("g", 64)},
		{"sha512", "sha512:" + strings.Repeat("a", 128)},
		{"md5", "md5:" + strings.Repeat("a", 32)},
		{"upper algorithm", "SHA256:" + strings.Repeat("a", 64)},
		{"colon only", ":"},
		{"trailing newline", good[:len(good)-1] + "\n"},
		{"space", " " + good[1:]},
	}
	for _, v := range vectors {
		_, err := ParseDigest(v.in)
		if code := refuse.CodeOf(err); code != CodeDigestInvalid {
			t.Errorf("%s: code %q want %q", v.name, code, CodeDigestInvalid)
		}
	}
}

func TestMarshalRecordRefuses(t *testing.T) {
	type ints struct {
		N int64 `json:"n"`
	}
	type floats struct {
		F float64 `json:"f"`
	}
	type slice struct {
		S []string `json:"s"`
	}
	vectors := []struct {
		name string      // what is wrong
		v    any         // value to marshal
		code refuse.Code // expected reason code
	}{
		{"2^53+1", ints{N: 1<<53 + 1}, CodeRecordIntegerRange},
		{"-2^53-1", &ints{N: -(1 << 53) - 1}, CodeRecordIntegerRange},
		{"max int64", ints{N: 1<<63 - 1}, CodeRecordIntegerRange},
		{"fraction", floats{F: 1.5}, CodeRecordNotInteger},
		{"huge float", floats{F: 1e300}, CodeRecordNotInteger},
		{"nil slice", slice{}, CodeRecordShape},
		{"bad digest", &FileRef{Path: "/x", Digest: "sha256:nope"}, CodeDigestInvalid},
		{"empty digest", Descriptor{MediaType: MediaTypeOctets, Size: 1}, CodeDigestInvalid},
		{"empty media type", Descriptor{Digest: FromBytes(nil)}, CodeDescriptorInvalid},
		{"negative size", Descriptor{MediaType: MediaTypeOctets, Digest: FromBytes(nil), Size: -1}, CodeDescriptorInvalid},
		{"not encodable", map[string]any{"c": make(chan int)}, CodeRecordEncode},
	}
	for _, v := range vectors {
		_, err := MarshalRecord(v.v)
		if code := refuse.CodeOf(err); code != v.code {
			t.Errorf("%s: code %q (%v) want %q", v.name, code, err, v.code)
		}
	}
	if b, err := MarshalRecord(ints{N: 1 << 53}); err != nil || string(b) != `{"n":9007199254740992}` {
		t.Errorf("2^53: %s %v", b, err)
	}
	if b, err := MarshalRecord(map[string]string{"z": "<&>", "a": "é"}); err != nil || string(b) != `{"a":"é","z":"<&>"}` {
		t.Errorf("map: %s %v", b, err)
	}
}

func TestDecodeStrictNumbersAndTargets(t *testing.T) {
	type ints struct {
		N int64 `json:"n"`
		U uint8 `json:"u,omitempty"`
	}
	vectors := []struct {
		in   string      // JSON text
		code refuse.Code // expected reason code, "" for accepted
	}{
		{`{"n":9007199254740992}`, ""},
		{`{"n":-9007199254740992}`, ""},
		{`{"n":9007199254740993}`, CodeRecordIntegerRange},
		{`{"n":99999999999999999999999}`, CodeRecordIntegerRange},
		{`{"n":1.0}`, CodeRecordNotInteger},
		{`{"n":1e2}`, CodeRecordNotInteger},
		{`{"n":1,"u":256}`, CodeRecordIntegerRange},
		{`{"n":1,"u":-1}`, CodeRecordIntegerRange},
		{`{"n":"1"}`, CodeRecordShape},
		{`{"n":null}`, CodeRecordShape},
		{`[1]`, CodeRecordShape},
		{`{"n":1,"N":1}`, CodeRecordUnknownField},
		{`{}`, CodeRecordMissingField},
		{`{"n":01}`, CodeInvalidNumber},
	}
	for _, v := range vectors {
		var x ints
		if code := refuse.CodeOf(DecodeStrict([]byte(v.in), &x)); code != v.code {
			t.Errorf("%s: code %q want %q", v.in, code, v.code)
		}
	}
	var x ints
	if code := refuse.CodeOf(DecodeStrict([]byte(`{"n":1}`), x)); code != CodeRecordShape {
		t.Errorf("non-pointer target: code %q", code)
	}

	c := recordCases()[0].value.(*Command)
	d1, err := TargetDigest(c.Target())
	if err != nil {
		t.Fatal(err)
	}
	c2 := *c
	c2.Command, c2.Preflight = CommandPreflight, nil
	if d2, err := TargetDigest(c2.Target()); err != nil || d2 != d1 {
		t.Errorf("target digest depends on command or preflight: %s %s %v", d1, d2, err)
	}
	c2.ExpectedClusterUID = "other"
	if d3, _ := TargetDigest(c2.Target()); d3 == d1 {
		t.Errorf("target digest ignores the cluster uid")
	}
}

func TestDescriptors(t *testing.T) {
	c := recordCases()
	rec, err := MarshalRecord(c[len(c)-1].value) // receipt: nested, arrays, many descriptors
	if err != nil {
		t.Fatal(err)
	}
	ds, err := Descriptors(rec)
	if err != nil {
		t.Fatal(err)
	}
	r := c[len(c)-1].value.(*Receipt)
	// Document order of the canonical form: members sorted by name.
	want := []Descriptor{r.Command, r.Execs[0], r.Inputs.CommandFile, r.Inputs.Kubeconfig, r.Inputs.Kubectl,
		r.Inputs.LockReport, r.Inputs.Manifest, r.Intent, r.Kubeconfig, r.LockReport, r.Manifest, r.Preflight}
	if len(ds) != len(want) {
		t.Fatalf("got %d descriptors want %d: %+v", len(ds), len(want), ds)
	}
	for i := range want {
		if ds[i] != want[i] {
			t.Errorf("descriptor %d: got %+v want %+v", i, ds[i], want[i])
		}
	}
	good := `{"digest":"` + string(FromBytes(nil)) + `","mediaType":"x","size":0}`
	vectors := []struct {
		in   string      // record text
		code refuse.Code // expected reason code, "" for accepted
	}{
		{`{"a":[` + good + `,{"digest":1,"other":2,"size":3}]}`, ""},
		{`{"a":{"digest":"sha256:x","mediaType":"x","size":0}}`, CodeDigestInvalid},
		{`{"a":{"digest":"` + string(FromBytes(nil)) + `","mediaType":"","size":0}}`, CodeDescriptorInvalid},
		{`{"a":{"digest":"` + string(FromBytes(nil)) + `","mediaType":"x","size":-1}}`, CodeDescriptorInvalid},
		{`{"a":{"digest":"` + string(FromBytes(nil)) + `","mediaType":"x","size":1.5}}`, CodeRecordNotInteger},
		{`{"a":{"digest":"` + string(FromBytes(nil)) + `","mediaType":"x","size":"1"}}`, CodeRecordShape},
		{`{"a":{"digest":"` + string(FromBytes(nil)) + `","mediaType":null,"size":1}}`, CodeRecordShape},
		{`{"a":1,"a":2}`, CodeDuplicateKey},
		{`{"a":`, CodeInvalidJSON},
	}
	for _, v := range vectors {
		_, err := Descriptors([]byte(v.in))
		if code := refuse.CodeOf(err); code != v.code {
			t.Errorf("%s: code %q (%v) want %q", v.in, code, err, v.code)
		}
	}
}

func TestRefusalPaths(t *testing.T) {
	_, err := MarshalRecord(map[string]any{"a": []any{1, map[string]any{"b": 1.5}}})
	if refuse.CodeOf(err) != CodeRecordNotInteger || !strings.Contains(err.Error(), "$.a[1].b") {
		t.Errorf("got %v, want %s at $.a[1].b", err, CodeRecordNotInteger)
	}
	long := strings.Repeat("k", 1000)
	_, err = Descriptors([]byte(`{"` + long + `":[{"digest":"sha256:x","mediaType":"m","size":1}]}`))
	if refuse.CodeOf(err) != CodeDigestInvalid || !strings.Contains(err.Error(), "$."+strings.Repeat("k", 64)+"...[0]") || len(err.Error()) > 300 {
		t.Errorf("got %v, want %s with a truncated path", err, CodeDigestInvalid)
	}
}

func TestMarshalRecordUntypedField(t *testing.T) {
	type withAny struct {
		Schema string `json:"schema"`
		Extra  any    `json:"extra"`
	}
	b, err := MarshalRecord(withAny{Schema: "s", Extra: map[string]any{"b": []any{int64(1), "x", true}, "a": map[string]any{}}})
	if err != nil || string(b) != `{"extra":{"a":{},"b":[1,"x",true]},"schema":"s"}` {
		t.Fatalf("got %s, %v", b, err)
	}
	if _, err := MarshalRecord(withAny{Schema: "s"}); refuse.CodeOf(err) != CodeRecordShape {
		t.Errorf("nil any: %v, want %s", err, CodeRecordShape)
	}
	var w withAny
	if err := DecodeStrict([]byte(`{"schema":"s","extra":[1.5]}`), &w); refuse.CodeOf(err) != CodeRecordNotInteger {
		t.Errorf("fraction in any: %v, want %s", err, CodeRecordNotInteger)
	}
}
