package evidence

import (
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/opencontainers/go-digest"
	"github.com/qinglong/ql3/refuse"
)

var (
	digestType     = reflect.TypeFor[digest.Digest]()
	descriptorType = reflect.TypeFor[Descriptor]()
)

var kindNames = [...]string{kNull: "null", kBool: "boolean", kNumber: "number", kString: "string", kArray: "array", kObject: "object"}

func shapeErr(n *node, path, want string) error {
	return refuse.New(CodeRecordShape, "%s at %s where %s is required", kindNames[n.kind], path, want)
}

// decodeValue stores n into v. It is a closed-world decoder: it knows the json tag rules ql3's
// records use (name, omitempty, "-") and refuses everything else rather than guessing.
func decodeValue(n *node, v reflect.Value, path string) error {
	if n.kind == kNull {
		return refuse.New(CodeRecordShape, "null at %s", path)
	}
	t := v.Type()
	if t == digestType {
		if n.kind != kString {
			return shapeErr(n, path, "a digest string")
		}
		d, err := ParseDigest(n.str)
		if err != nil {
			return refuse.Wrap(CodeDigestInvalid, err, "at %s", path)
		}
		v.SetString(string(d))
		return nil
	}
	switch t.Kind() {
	case reflect.Pointer:
		p := reflect.New(t.Elem())
		if err := decodeValue(n, p.Elem(), path); err != nil {
			return err
		}
		v.Set(p)
	case reflect.String:
		if n.kind != kString {
			return shapeErr(n, path, "a string")
		}
		v.SetString(n.str)
	case reflect.Bool:
		if n.kind != kBool {
			return shapeErr(n, path, "a boolean")
		}
		v.SetBool(n.b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if n.kind != kNumber {
			return shapeErr(n, path, "an integer")
		}
		i, err := recordInt(n, path)
		if err != nil {
			return err
		}
		if v.OverflowInt(i) {
			return refuse.New(CodeRecordIntegerRange, "integer at %s overflows %s", path, t.Kind())
		}
		v.SetInt(i)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if n.kind != kNumber {
			return shapeErr(n, path, "an integer")
		}
		i, err := recordInt(n, path)
		if err != nil {
			return err
		}
		if i < 0 || v.OverflowUint(uint64(i)) {
			return refuse.New(CodeRecordIntegerRange, "integer at %s overflows %s", path, t.Kind())
		}
		v.SetUint(uint64(i))
	case reflect.Slice:
		if n.kind != kArray {
			return shapeErr(n, path, "an array")
		}
		s := reflect.MakeSlice(t, len(n.elems), len(n.elems))
		for i, e := range n.elems {
			if err := decodeValue(e, s.Index(i), path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
		v.Set(s)
	case reflect.Map:
		if n.kind != kObject || t.Key().Kind() != reflect.String {
			return shapeErr(n, path, "an object")
		}
		m := reflect.MakeMapWithSize(t, len(n.keys))
		for i, k := range n.keys {
			e := reflect.New(t.Elem()).Elem()
			if err := decodeValue(n.elems[i], e, path+"."+pathKey(k.str)); err != nil {
				return err
			}
			m.SetMapIndex(reflect.ValueOf(k.str).Convert(t.Key()), e)
		}
		v.Set(m)
	case reflect.Struct:
		if n.kind != kObject {
			return shapeErr(n, path, "an object")
		}
		if err := decodeStruct(n, v, path); err != nil {
			return err
		}
		if t == descriptorType {
			return validateDescriptor(v.Interface().(Descriptor), path)
		}
	case reflect.Interface:
		if t.NumMethod() != 0 {
			return refuse.New(CodeRecordShape, "field at %s has unsupported go type %s", path, t)
		}
		g, err := generic(n, path)
		if err != nil {
			return err
		}
		v.Set(reflect.ValueOf(&g).Elem())
	default:
		return refuse.New(CodeRecordShape, "field at %s has unsupported go type %s", path, t)
	}
	return nil
}

type field struct {
	name     string
	index    int
	required bool
}

type structInfo struct {
	fields []field
	byName map[string]int // name -> position in fields
}

var structCache sync.Map // reflect.Type -> *structInfo

func infoOf(t reflect.Type) *structInfo {
	if si, ok := structCache.Load(t); ok {
		return si.(*structInfo)
	}
	si := &structInfo{byName: map[string]int{}}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		omit := false
		for o := range strings.SplitSeq(opts, ",") {
			omit = omit || o == "omitempty" || o == "omitzero"
		}
		si.byName[name] = len(si.fields)
		si.fields = append(si.fields, field{name: name, index: i, required: !omit})
	}
	structCache.Store(t, si)
	return si
}

func decodeStruct(n *node, v reflect.Value, path string) error {
	si := infoOf(v.Type())
	seen := make([]bool, len(si.fields))
	for i, k := range n.keys {
		fi, ok := si.byName[k.str]
		if !ok {
			return refuse.New(CodeRecordUnknownField, "unknown field %s at %s", quoteKey(k.str), path)
		}
		seen[fi] = true
		f := si.fields[fi]
		if err := decodeValue(n.elems[i], v.Field(f.index), path+"."+f.name); err != nil {
			return err
		}
	}
	for fi, f := range si.fields {
		if f.required && !seen[fi] {
			return refuse.New(CodeRecordMissingField, "missing field %s at %s", f.name, path)
		}
	}
	return nil
}

// generic converts n for an untyped (any) field: objects to map[string]any, arrays to []any,
// numbers to int64 (records hold integers only), still refusing null.
func generic(n *node, path string) (any, error) {
	switch n.kind {
	case kBool:
		return n.b, nil
	case kString:
		return n.str, nil
	case kNumber:
		return recordInt(n, path)
	case kArray:
		out := make([]any, len(n.elems))
		for i, e := range n.elems {
			g, err := generic(e, path+"["+strconv.Itoa(i)+"]")
			if err != nil {
				return nil, err
			}
			out[i] = g
		}
		return out, nil
	case kObject:
		out := make(map[string]any, len(n.keys))
		for i, k := range n.keys {
			g, err := generic(n.elems[i], path+"."+pathKey(k.str))
			if err != nil {
				return nil, err
			}
			out[k.str] = g
		}
		return out, nil
	}
	return nil, refuse.New(CodeRecordShape, "null at %s", path)
}
