package evidence

import (
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/refuse"
)

// descriptorInputs are index entries of every shape: the canonical ones the byte match takes,
// canonical ones it leaves to the full decoder, and refused ones.
func descriptorInputs() []string {
	hex := strings.Repeat("0123456789abcdef", 4)
	d := `"sha256:` + hex + `"`
	return []string{
		`{"digest":` + d + `,"mediaType":"application/vnd.qinglong.ql3.receipt.v1+json","size":1234}`,
		`{"digest":` + d + `,"mediaType":"a","size":0}`,
		`{"digest":` + d + `,"mediaType":"a b;c=d <>","size":9007199254740992}`, // 2^53
		`{"digest":` + d + `,"mediaType":"a","size":9007199254740993}`,          // 2^53+1
		`{"digest":` + d + `,"mediaType":"a","size":99999999999999999}`,
		`{"digest":` + d + `,"mediaType":"a","size":01}`,
		`{"digest":` + d + `,"mediaType":"a","size":-1}`,
		`{"digest":` + d + `,"mediaType":"a","size":1.0}`,
		`{"digest":` + d + `,"mediaType":"a","size":1e3}`,
		`{"digest":` + d + `,"mediaType":"a","size":}`,
		`{"digest":` + d + `,"mediaType":"a","size":"1"}`,
		`{"digest":` + d + `,"mediaType":"","size":1}`,
		`{"digest":` + d + `,"mediaType":"\u0061","size":1}`,
		`{"digest":` + d + `,"mediaType":"a\"b","size":1}`,
		`{"digest":` + d + `,"mediaType":"é","size":1}`,
		`{"digest":` + d + `,"mediaType":"a` + "\x7f" + `","size":1}`,
		`{"digest":` + d + `,"mediaType":"a` + "\t" + `","size":1}`,
		`{"digest":` + d + `,"mediaType":"a","size":1} `,
		`{"digest":` + d + `,"mediaType":"a","size":1}}`,
		`{"digest":` + d + `,"mediaType":"a","size":1,"x":1}`,
		`{"digest":` + d + `, "mediaType":"a","size":1}`,
		`{"mediaType":"a","digest":` + d + `,"size":1}`,
		`{"digest":"sha256:` + strings.ToUpper(hex) + `","mediaType":"a","size":1}`,
		`{"digest":"sha256:` + hex[1:] + `","mediaType":"a","size":1}`,
		`{"digest":"sha512:` + hex + `","mediaType":"a","size":1}`,
		`{"digest":` + d + `,"mediaType":"a"}`,
		`{"digest":` + d + `}`,
		`{"digest":"`,
		`{}`,
		``,
		`null`,
	}
}

// TestDecodeCanonicalDescriptor holds the byte match to DecodeCanonical: the same value for every
// input either accepts, and the full decoder's refusal (with its code) for the rest.
func TestDecodeCanonicalDescriptor(t *testing.T) {
	matched := 0
	for _, in := range descriptorInputs() {
		got, err := DecodeCanonicalDescriptor([]byte(in))
		var want Descriptor
		werr := DecodeCanonical([]byte(in), &want)
		if _, ok := matchCanonicalDescriptor([]byte(in)); ok {
			matched++
		}
		if (err == nil) != (werr == nil) || (err == nil && got != want) || refuse.CodeOf(err) != refuse.CodeOf(werr) {
			t.Errorf("%s: got %+v %v, full decoder %+v %v", in, got, err, want, werr)
		}
		if err != nil && refuse.CodeOf(err) == "" {
			t.Errorf("%s: refusal without a code: %v", in, err)
		}
	}
	if matched != 3 {
		t.Errorf("the byte match took %d inputs, want the 3 canonical ascii ones", matched)
	}
}

func FuzzDecodeCanonicalDescriptor(f *testing.F) {
	for _, in := range descriptorInputs() {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		d, ok := matchCanonicalDescriptor(b)
		if !ok {
			return
		}
		var want Descriptor
		if err := DecodeCanonical(b, &want); err != nil || want != d {
			t.Fatalf("%q: byte match %+v, full decoder %+v %v", b, d, want, err)
		}
	})
}

// Every digest ParseDigest accepts is one go-digest accepts too (ParseDigest no longer asks it).
func TestParseDigestGoDigest(t *testing.T) {
	for _, s := range []string{"sha256:" + strings.Repeat("0123456789abcdef", 4), string(FromBytes(nil)), "sha256:" + strings.Repeat("f", 64)} {
		d, err := ParseDigest(s)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Validate(); err != nil || d.Algorithm() != digest.SHA256 {
			t.Fatalf("%s: go-digest: %v", s, err)
		}
	}
	for _, b := range []string{"", "a", strings.Repeat("record", 1000)} {
		if got, want := FromBytes([]byte(b)), digest.SHA256.FromBytes([]byte(b)); got != want {
			t.Fatalf("FromBytes %q = %s, go-digest %s", b, got, want)
		}
	}
}

func FuzzParseDigest(f *testing.F) {
	f.Add("sha256:" + strings.Repeat("0123456789abcdef", 4))
	f.Add("sha256:" + strings.Repeat("A", 64))
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDigest(s)
		if err != nil {
			return
		}
		if verr := digest.Digest(s).Validate(); verr != nil || d.Algorithm() != digest.SHA256 {
			t.Fatalf("%q accepted, go-digest refuses it: %v", s, verr)
		}
	})
}
