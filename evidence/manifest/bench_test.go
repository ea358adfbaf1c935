package manifest

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkParseWideLine parses one document whose data is a single flow mapping line of 20,000
// members with non-ASCII keys: tag detection must stay linear in the line length.
func BenchmarkParseWideLine(b *testing.B) {
	var s strings.Builder
	s.WriteString(head + "data: {")
	for i := range 20000 {
		fmt.Fprintf(&s, "ключ%d: значение, ", i)
	}
	s.WriteString("z: end}\n")
	in := []byte(s.String())
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(in); err != nil {
			b.Fatal(err)
		}
	}
}
