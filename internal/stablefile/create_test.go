package stablefile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qinglong/ql3/refuse"
)

func TestCreate(t *testing.T) {
	dir := privateDir(t)
	p := filepath.Join(dir, "apply.json")
	if err := CheckCreatable("apply command", p); err != nil {
		t.Fatal(err)
	}
	if err := Create("apply command", p, []byte("{}\n")); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(p)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
		t.Fatalf("created file %v, err %v", fi.Mode(), err)
	}
	if b, _ := os.ReadFile(p); string(b) != "{}\n" {
		t.Fatalf("content %q", b)
	}
	// The result is itself a valid private input.
	if _, err := Read(p, "apply command", 1<<10); err != nil {
		t.Fatalf("created file is not a private input: %v", err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("staging file left behind: %v", ents)
	}
}

func TestCreateRefusals(t *testing.T) { resolvers(t, testCreateRefusals) }

func testCreateRefusals(t *testing.T) {
	needRoot(t)
	base := privateDir(t)
	mk := func(name string, mode os.FileMode) string {
		d := filepath.Join(base, name)
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, mode); err != nil {
			t.Fatal(err)
		}
		return d
	}
	open := mk("open", 0o755)
	other := mk("other", 0o700)
	if err := os.Chown(other, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	good := mk("good", 0o700)
	exists := filepath.Join(good, "exists.json")
	if err := os.WriteFile(exists, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	dangling := filepath.Join(good, "dangling.json")
	if err := os.Symlink(filepath.Join(good, "nowhere"), dangling); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(good, link); err != nil {
		t.Fatal(err)
	}
	vectors := []struct {
		path string      // where to create
		code refuse.Code // the refusal
	}{
		{"rel/apply.json", CodePathInvalid},
		{good + "/../good/x.json", CodePathInvalid},
		{filepath.Join(open, "x.json"), CodeNotPrivate},
		{filepath.Join(other, "x.json"), CodeNotPrivate},
		{filepath.Join(link, "x.json"), CodeSymlink},
		{filepath.Join(base, "absent", "x.json"), CodeNotFound},
		{exists, CodeCreate},
		{dangling, CodeCreate}, // a symlink, even a dangling one, is never written through
	}
	for _, v := range vectors {
		if got := refuse.CodeOf(CheckCreatable("apply command", v.path)); got != v.code {
			t.Errorf("CheckCreatable(%s) = %s, want %s", v.path, got, v.code)
		}
		if got := refuse.CodeOf(Create("apply command", v.path, []byte("new"))); got != v.code {
			t.Errorf("Create(%s) = %s, want %s", v.path, got, v.code)
		}
	}
	if b, _ := os.ReadFile(exists); string(b) != "old" {
		t.Fatalf("existing file replaced: %q", b)
	}
	if _, err := os.Lstat(filepath.Join(good, "nowhere")); !os.IsNotExist(err) {
		t.Fatalf("written through a dangling symlink: %v", err)
	}
}

// TestCreateRace: a file that appears at the path after the checks is never replaced; a crash
// before the commit leaves no file at the path.
func TestCreateRace(t *testing.T) {
	dir := privateDir(t)
	p := filepath.Join(dir, "apply.json")
	defer func() { hookBeforeCommit = func() {} }()
	hookBeforeCommit = func() {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("the path exists before the commit: %v", err)
		}
		if err := os.WriteFile(p, []byte("racer"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	err := Create("apply command", p, []byte("ours"))
	if refuse.CodeOf(err) != CodeCreate || !strings.Contains(err.Error(), "exists already") {
		t.Fatalf("err %v", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "racer" {
		t.Fatalf("the racer's file was replaced: %q", b)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("staging file left behind: %v", ents)
	}
}
