package refuse_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/qinglong/ql3/refuse"
)

var updateDocs = flag.Bool("update-docs", false, "rewrite docs/reason-codes.md from the other docs' tables")

// codeRow is a table row of an area document whose first cell is one reason code.
var codeRow = regexp.MustCompile("^\\|\\s*`([A-Z][A-Z0-9_]*)`\\s*\\|(.*)$")

// reasonCodesIndex renders docs/reason-codes.md from the reason-code tables of the other
// documents in docs/: each area documents its codes beside its format, and this is their index.
func reasonCodesIndex(docs string) ([]byte, error) {
	names, err := filepath.Glob(filepath.Join(docs, "*.md"))
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var b bytes.Buffer
	b.WriteString("# Reason codes\n\n" +
		"Every refusal prints `ql3: refused: CODE: message` on stderr and exits with its code's status, the\n" +
		"exit column below: 1, or 2 for the command line's own codes, whose line reads `ql3: usage: CODE:\n" +
		"message`. The column is generated from the one table of exit statuses (`refuse/exit.go`), so the\n" +
		"same code exits the same way from every command. `--output json` prints\n" +
		"`{\"ok\":false,\"code\":\"CODE\",...}`. Codes are stable: a code is never reused\n" +
		"for another meaning. Each is defined once, beside the check that raises it, and a test\n" +
		"(refuse) keeps this index and the code in step. This file is generated from the tables in\n" +
		"the documents named below (`go test ./refuse -run TestReasonCodesIndexFresh -update-docs`);\n" +
		"edit those, not this file.\n")
	for _, name := range names {
		base := filepath.Base(name)
		if base == "reason-codes.md" {
			continue
		}
		raw, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		lines := strings.Split(string(raw), "\n")
		var rows []string
		for _, l := range lines {
			m := codeRow.FindStringSubmatch(l)
			if m == nil {
				continue
			}
			rest := strings.Join(strings.Fields(strings.TrimSuffix(strings.TrimSpace(m[2]), "|")), " ")
			rows = append(rows, fmt.Sprintf("| `%s` | %d | %s |", m[1], refuse.ExitStatus(refuse.Code(m[1])), rest))
		}
		if len(rows) == 0 {
			continue
		}
		title := strings.TrimSpace(strings.TrimPrefix(lines[0], "#"))
		b.WriteString("\n## " + title + " ([" + base + "](" + base + "))\n\n| code | exit | raised when |\n|---|---|---|\n")
		b.WriteString(strings.Join(rows, "\n") + "\n")
	}
	return b.Bytes(), nil
}

// TestReasonCodesIndexFresh regenerates docs/reason-codes.md and compares it byte for byte, so the
// index cannot drift from the area documents (TestReasonCodesDocumented ties those to the code).
func TestReasonCodesIndexFresh(t *testing.T) {
	docs, err := filepath.Abs("../docs")
	if err != nil {
		t.Fatal(err)
	}
	want, err := reasonCodesIndex(docs)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(docs, "reason-codes.md")
	if *updateDocs {
		if err := os.WriteFile(p, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("docs/reason-codes.md is stale: run go test ./refuse -run TestReasonCodesIndexFresh -update-docs")
	}
}
