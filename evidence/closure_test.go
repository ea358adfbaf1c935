package evidence

import (
	"slices"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/refuse"
)

func TestClosure(t *testing.T) {
	blob := func(s string) (Descriptor, []byte) {
		b := []byte(s)
		return Descriptor{MediaType: MediaTypeOctets, Digest: FromBytes(b), Size: int64(len(b))}, b
	}
	a, ab := blob("a")
	b, bb := blob("b")
	objs := map[digest.Digest][]byte{a.Digest: ab, b.Digest: bb}
	rec := func(v any) Descriptor {
		raw, err := MarshalRecord(v)
		if err != nil {
			t.Fatal(err)
		}
		d := Descriptor{MediaType: MediaTypeIntent, Digest: FromBytes(raw), Size: int64(len(raw))}
		objs[d.Digest] = raw
		return d
	}
	// An intent's descriptors in document order: command, execs..., preflight.
	root := rec(Intent{Schema: SchemaIntent, Command: b, Preflight: a, Target: a.Digest, Execs: []Descriptor{a, b}, ClusterUID: "u", CreatedAt: "t"})
	var calls []Descriptor
	get := func(d Descriptor) ([]byte, error) {
		calls = append(calls, d)
		x, ok := objs[d.Digest]
		if !ok {
			return nil, refuse.New(CodeDescriptorInvalid, "missing %s", d.Digest)
		}
		return x, nil
	}
	got, err := Closure(root, get)
	if err != nil {
		t.Fatal(err)
	}
	if want := []Descriptor{root, b, a}; !slices.Equal(got, want) {
		t.Fatalf("closure %v, want %v", got, want)
	}
	if len(calls) != 3 {
		t.Fatalf("get called %d times for 3 distinct descriptors", len(calls))
	}

	// The same digest under another media type is handed to get again.
	calls = nil
	a2 := a
	a2.MediaType = MediaTypeStdout
	root2 := rec(Intent{Schema: SchemaIntent, Command: a, Preflight: a2, Target: a.Digest, Execs: []Descriptor{}, ClusterUID: "u", CreatedAt: "t"})
	if _, err := Closure(root2, get); err != nil || !slices.Contains(calls, a2) {
		t.Fatalf("second descriptor of %s not checked: %v %v", a.Digest, err, calls)
	}

	// An error of get stops the walk, its code intact.
	delete(objs, b.Digest)
	if _, err := Closure(root, get); refuse.CodeOf(err) != CodeDescriptorInvalid {
		t.Fatalf("missing object: %v", err)
	}
}
