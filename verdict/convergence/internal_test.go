package convergence

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestDecimal(t *testing.T) {
	vectors := []struct {
		a, b  string // two JSON number literals
		equal bool   // whether they denote the same decimal value
	}{
		{"1", "1.0", true},
		{"1", "1e0", true},
		{"1", "10e-1", true},
		{"100", "1E+2", true},
		{"0", "-0", true},
		{"0", "0.000e999", true},
		{"-0.0", "0e-5", true},
		{"1.5", "15e-1", true},
		{"5700", "5.7e3", true},
		{"1e-00000000000000000000001", "0.1", true},
		{"1e99999999999999999999", "10e99999999999999999998", true},
		{"1", "1.0000000000000000001", false},
		{"9007199254740993", "9007199254740992", false}, // equal as float64
		{"1", "-1", false},
		{"1e99999999999999999999", "1e99999999999999999998", false},
		{"20", "2", false},
		{"0.1", "0.01", false},
	}
	for _, v := range vectors {
		if got := numbersEqual(json.Number(v.a), json.Number(v.b)); got != v.equal {
			t.Errorf("%s == %s: %v, want %v", v.a, v.b, got, v.equal)
		}
		if got := canon(json.Number(v.a)) == canon(json.Number(v.b)); got != v.equal {
			t.Errorf("canon %s == %s: %v, want %v", v.a, v.b, got, v.equal)
		}
	}
	for _, bad := range []string{"", "-", "01", "1.", ".1", "1e", "1e+", "+1", "0x1", "1_0", "NaN", "Infinity", "1 ", " 1", "--1", "1.2.3"} {
		if _, ok := parseDecimal(bad); ok {
			t.Errorf("%q parsed as a number", bad)
		}
	}
}

func TestCanonInjective(t *testing.T) {
	values := []any{nil, true, false, "", "a", "s1:a", json.Number("1"), json.Number("-1"),
		map[string]any{}, []any{}, map[string]any{"a": "b"}, map[string]any{"a": "b", "c": "d"},
		map[string]any{"ab": ""}, map[string]any{"a": "b:"}, []any{"a", "b"}, []any{"ab"}, []any{[]any{}},
		map[string]any{"a": json.Number("1")}, map[string]any{"a": "1"}, []any{json.Number("1"), json.Number("2")}, []any{json.Number("12")}}
	seen := map[string]int{}
	for i, v := range values {
		c := canon(v)
		if j, ok := seen[c]; ok {
			t.Errorf("values %d and %d share canon %q", j, i, c)
		}
		seen[c] = i
	}
}

func TestPathString(t *testing.T) {
	p := fieldPath(nil).key("spec").key("template").key("spec").key("containers").
		index(0, map[string]any{"name": "api"}).key("env").index(3, map[string]any{"name": "a b"}).key("value")
	if got, want := p.String(), "spec.template.spec.containers[name=api].env[3].value"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	p = fieldPath(nil).key("metadata").key("annotations").key("qinglong.io/role")
	if got, want := p.String(), `metadata.annotations["qinglong.io/role"]`; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	p = fieldPath(nil).key("data").key(strings.Repeat("k", 200) + "\n")
	if got := p.String(); len(got) > 120 || strings.Contains(got, "\n") {
		t.Errorf("unbounded path %q", got)
	}
	if got := fieldPath(nil).String(); got != "(object)" {
		t.Errorf("%q", got)
	}
}

func mustSet(t *testing.T, js string) *fnode {
	t.Helper()
	var v any
	dec := json.NewDecoder(strings.NewReader(js))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	n, err := parseSet(v, 0)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestElements covers list element resolution for the three member kinds, including the ones the
// real cluster fixtures do not produce (i: positions, keys that do not identify one element).
func TestElements(t *testing.T) {
	live := []any{
		map[string]any{"containerPort": json.Number("80"), "protocol": "TCP"},
		map[string]any{"containerPort": json.Number("80"), "protocol": "UDP"},
		map[string]any{"containerPort": json.Number("81")},
	}
	vectors := []struct {
		name  string // the field set of the list
		set   string // its FieldsV1 JSON
		owned []bool // whether each live element resolves to a member with "."
	}{
		{"keys with a defaulted field", `{"k:{\"containerPort\":80,\"protocol\":\"TCP\"}":{".":{}},"k:{\"containerPort\":80,\"protocol\":\"UDP\"}":{".":{}}}`, []bool{true, true, false}},
		{"a key that matches two elements", `{"k:{\"containerPort\":80}":{".":{}}}`, []bool{false, false, false}},
		{"a key missing from the element", `{"k:{\"containerPort\":81,\"protocol\":\"TCP\"}":{".":{}}}`, []bool{false, false, false}},
		{"a key in two groups", `{"k:{\"containerPort\":81}":{".":{}},"k:{\"containerPort\":80,\"protocol\":\"TCP\"}":{".":{}}}`, []bool{true, false, true}},
		{"positions", `{"i:0":{".":{}},"i:2":{".":{}}}`, []bool{true, false, true}},
		{"a position past the end", `{"i:5":{".":{}}}`, []bool{false, false, false}},
	}
	for _, v := range vectors {
		els, err := owner{n: mustSet(t, v.set)}.elements(live, 1)
		if err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		for i, want := range v.owned {
			if els[i].owns() != want {
				t.Errorf("%s: element %d owned %v, want %v", v.name, i, els[i].owns(), want)
			}
		}
	}
	values := []any{"a", "b", "a"}
	els, err := owner{n: mustSet(t, `{"v:\"a\"":{},"v:\"b\"":{}}`)}.elements(values, 1)
	if err != nil || els[0].owns() || !els[1].owns() || els[2].owns() {
		t.Errorf("set values: a value present twice must identify nothing: %v %+v", err, els)
	}
	if _, err := (owner{n: mustSet(t, `{"v:\"a\"":{},"i:0":{}}`)}).elements([]any{"a"}, 1); err != errAmbiguous {
		t.Errorf("v: and i: for one element: %v", err)
	}
	els, _ = owner{whole: true, atomic: 1}.elements(values, 2)
	if !els[2].owns() || els[2].atomic != 1 {
		t.Errorf("elements of an atomic list: %+v", els[2])
	}
}
