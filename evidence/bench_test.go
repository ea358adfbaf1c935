package evidence

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cyberphone/json-canonicalization/go/src/webpki.org/jsoncanonicalizer"
)

// objectWithKeys is a flat object of n already-sorted keys: the case that is quadratic in the
// library's own member sort.
func objectWithKeys(n int) []byte {
	var sb strings.Builder
	sb.WriteByte('{')
	for i := range n {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `"k%08d":%d`, i, i)
	}
	sb.WriteByte('}')
	return []byte(sb.String())
}

// mixedDocument is about 1 MiB of records-like JSON: nested objects, strings with escapes, numbers.
func mixedDocument() []byte {
	var sb strings.Builder
	sb.WriteByte('[')
	for i := 0; sb.Len() < 1<<20; i++ {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"schema":"qinglong/ql3-exec@v1","argv":["kubectl","--context","c\u00e9-%d"],"stdout":{"mediaType":"application/octet-stream","digest":"sha256:%064x","size":%d},"durationMs":%d.5,"note":"line\nbreak \"quoted\""}`, i, i, i*7, i)
	}
	sb.WriteByte(']')
	return []byte(sb.String())
}

func BenchmarkCanonicalizeMixed(b *testing.B) {
	in := mixedDocument()
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		if _, err := Canonicalize(in); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCanonicalizeRecord(b *testing.B) {
	c := recordCases()
	in, err := MarshalRecord(c[len(c)-1].value)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		if _, err := Canonicalize(in); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCanonicalizeKeys(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		in := objectWithKeys(n)
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			for b.Loop() {
				if _, err := Canonicalize(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkLibraryKeys is the unwrapped library on the same input, for comparison; 100k keys is
// left out because it takes tens of seconds.
func BenchmarkLibraryKeys(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		in := objectWithKeys(n)
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			for b.Loop() {
				if _, err := jsoncanonicalizer.Transform(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkDecodeRecordReceipt(b *testing.B) {
	c := recordCases()
	in, err := MarshalRecord(c[len(c)-1].value)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		var r Receipt
		if err := DecodeRecord(MediaTypeReceipt, in, &r); err != nil {
			b.Fatal(err)
		}
	}
}
