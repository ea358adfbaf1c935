package main

import (
	"debug/elf"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
)

// dynamicLinking lists what makes the ELF file at p dynamically linked: a program interpreter, a
// dynamic section, needed shared libraries. A dynamically linked ql3 would let its loader honour
// LD_PRELOAD and LD_LIBRARY_PATH from the operator's environment before any of ql3's checks run.
func dynamicLinking(p string) ([]string, error) {
	f, err := elf.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var found []string
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP || prog.Type == elf.PT_DYNAMIC {
			found = append(found, prog.Type.String())
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		return nil, err
	}
	for _, l := range libs {
		found = append(found, fmt.Sprintf("needs %s", l))
	}
	return found, nil
}

func checkStatic(t *testing.T, p string) {
	t.Helper()
	found, err := dynamicLinking(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 0 {
		t.Errorf("%s is dynamically linked: %v", p, found)
	}
}

// TestMakeBuildIsStatic builds ql3 exactly as the README says (make build) and checks the binary.
func TestMakeBuildIsStatic(t *testing.T) {
	out := filepath.Join(t.TempDir(), "ql3")
	cmd := exec.Command("make", "-s", "build", "BIN="+out)
	cmd.Dir = "../.."
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, b)
	}
	checkStatic(t, out)
}

// TestTestBinaryIsStatic: the binary the CLI tests run is built the same way as the release one.
func TestTestBinaryIsStatic(t *testing.T) { checkStatic(t, ql3Binary(t)) }

// TestDynamicLinkingDetected keeps the check honest: the system's own dynamically linked
// programs are reported.
func TestDynamicLinkingDetected(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh to compare with")
	}
	found, err := dynamicLinking(sh)
	if err != nil {
		t.Fatal(err)
	}
	if len(found) == 0 {
		t.Fatalf("%s reported static: the check cannot see dynamic linking", sh)
	}
}
