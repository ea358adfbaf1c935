package convergence_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/evidence/lock"
	"github.com/qinglong/ql3/evidence/manifest"
	"github.com/qinglong/ql3/verdict/convergence"
	"github.com/qinglong/ql3/verdict/convergence/internal/convtest"
)

// capture is one output captured from the real cluster (livetest -update) with the manifest that
// was applied to produce it.
type capture struct {
	objs  []manifest.Object
	auths []lock.Authority
	out   []byte
}

func (c capture) input() convergence.Input {
	return convergence.Input{Objects: c.objs, Authorities: c.auths, FieldManager: evidence.FieldManager, Stdout: c.out}
}

func readFile(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// load reads a captured output and the manifest it was read for; the manifest's namespace is
// rewritten to the one the capture was taken in, as livetest does before applying.
func load(t testing.TB, out, manifestFile string) capture {
	t.Helper()
	b := readFile(t, out)
	ns := namespaceOf(t, b)
	m := bytes.ReplaceAll(readFile(t, manifestFile), []byte("namespace: qinglong"), []byte("namespace: "+ns))
	objs, err := convtest.Objects(m)
	if err != nil {
		t.Fatal(err)
	}
	return capture{objs: objs, auths: convtest.Authorities(objs), out: b}
}

func namespaceOf(t testing.TB, out []byte) string {
	t.Helper()
	var doc struct {
		Items    []struct{ Metadata struct{ Namespace string } }
		Metadata struct{ Namespace string }
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Items) > 0 {
		return doc.Items[0].Metadata.Namespace
	}
	return doc.Metadata.Namespace
}

// decode and encode round-trip an output through a generic tree, keeping numbers as written.
func decode(t testing.TB, b []byte) map[string]any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v map[string]any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func encode(t testing.TB, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "    ")
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// at follows a path of map keys (string) and list indexes (int); "ours" selects our manager's
// Apply entry in a managedFields list.
func at(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			if k == "ours" {
				for _, e := range v.([]any) {
					if m := e.(map[string]any); m["manager"] == evidence.FieldManager && m["operation"] == "Apply" {
						v = m
					}
				}
				continue
			}
			v = v.(map[string]any)[k]
		case int:
			v = v.([]any)[k]
		}
	}
	return v
}

// set assigns value at path (the last step a map key or list index); a nil value with del
// deletes a map key.
func set(v any, value any, path ...any) {
	parent := at(v, path[:len(path)-1]...)
	switch k := path[len(path)-1].(type) {
	case string:
		parent.(map[string]any)[k] = value
	case int:
		parent.([]any)[k] = value
	}
}

func del(v any, path ...any) {
	delete(at(v, path[:len(path)-1]...).(map[string]any), path[len(path)-1].(string))
}

// item paths into the captured List.
func item(i int, path ...any) []any { return append([]any{"items", i}, path...) }

func fields(i int, path ...any) []any {
	return append([]any{"items", i, "metadata", "managedFields", "ours", "fieldsV1"}, path...)
}

// key renders a k: member name as the server writes it.
func key(fields ...string) string {
	var b strings.Builder
	b.WriteString("k:{")
	for i := 0; i < len(fields); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"` + fields[i] + `":` + fields[i+1])
	}
	return b.String() + "}"
}
