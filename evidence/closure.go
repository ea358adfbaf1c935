package evidence

import "github.com/opencontainers/go-digest"

// Closure returns every object reachable from root through the descriptors of its records: root
// first, then depth-first in document order, each digest once. It does no i/o of its own: get
// returns an object's bytes after checking them against the descriptor (hash, size and, for a
// record media type, canonical form and schema), so the same walk serves a store, an OCI layout
// and blobs fetched from a registry. A digest named again under another media type or size is
// handed to get again, so every descriptor of the closure is checked, not only the first.
// Closure stops at the first error get returns or a record's descriptors fail to parse.
func Closure(root Descriptor, get func(Descriptor) ([]byte, error)) ([]Descriptor, error) {
	first := map[digest.Digest]Descriptor{}
	var out []Descriptor
	stack := []Descriptor{root}
	for len(stack) > 0 {
		d := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if prev, seen := first[d.Digest]; seen {
			if prev != d {
				if _, err := get(d); err != nil {
					return nil, err
				}
			}
			continue
		}
		b, err := get(d)
		if err != nil {
			return nil, err
		}
		first[d.Digest] = d
		out = append(out, d)
		if _, isRecord := RecordSchema(d.MediaType); !isRecord {
			continue
		}
		children, err := Descriptors(b)
		if err != nil {
			return nil, err
		}
		for i := len(children) - 1; i >= 0; i-- {
			stack = append(stack, children[i])
		}
	}
	return out, nil
}
