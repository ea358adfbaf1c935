package evidence

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/qinglong/ql3/refuse"
)

// fuzzRecordTypes are the record media types FuzzDecodeRecord picks from by index; each comes with
// a constructor of an empty value of its struct.
var fuzzRecordTypes = []struct {
	mediaType string
	new       func() any
}{
	{MediaTypeCommand, func() any { return new(Command) }},
	{MediaTypeInput, func() any { return new(Input) }},
	{MediaTypeKubeconfig, func() any { return new(KubeconfigSummary) }},
	{MediaTypeExec, func() any { return new(Exec) }},
	{MediaTypePreflight, func() any { return new(Preflight) }},
	{MediaTypeIntent, func() any { return new(Intent) }},
	{MediaTypeReceipt, func() any { return new(Receipt) }},
}

// The committed corpus in testdata/fuzz/FuzzDecodeRecord holds one valid record of every type;
// the f.Add seeds repeat them so a plain go test exercises the property too.
func FuzzDecodeRecord(f *testing.F) {
	for _, c := range recordCases() {
		b, err := MarshalRecord(c.value)
		if err != nil {
			f.Fatal(err)
		}
		for i, rt := range fuzzRecordTypes {
			if rt.mediaType == c.mediaType {
				f.Add(uint8(i), b)
			}
		}
	}
	f.Fuzz(func(t *testing.T, kind uint8, b []byte) {
		rt := fuzzRecordTypes[int(kind)%len(fuzzRecordTypes)]
		v := rt.new()
		err := DecodeRecord(rt.mediaType, b, v)
		if err != nil {
			if refuse.CodeOf(err) == "" {
				t.Fatalf("refusal without a code: %v", err)
			}
			return
		}
		again, err := MarshalRecord(v)
		if err != nil {
			t.Fatalf("accepted record does not re-marshal: %v", err)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("re-marshal differs:\n in  %s\n out %s", b, again)
		}
		if _, err := Descriptors(b); err != nil {
			t.Fatalf("accepted record has a bad descriptor: %v", err)
		}
	})
}

func TestFuzzCorpusCommitted(t *testing.T) {
	for dir, min := range map[string]int{"FuzzCanonicalize": 10, "FuzzDecodeRecord": len(fuzzRecordTypes),
		"FuzzParseRecord": len(fuzzRecordTypes), "FuzzDecodeJSON": 5} {
		ents, err := os.ReadDir(filepath.Join("testdata", "fuzz", dir))
		if err != nil {
			t.Fatalf("seed corpus %s: %v", dir, err)
		}
		if len(ents) < min {
			t.Errorf("seed corpus %s has %d files, want at least %d", dir, len(ents), min)
		}
	}
}
