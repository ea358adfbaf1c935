package store

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// TestEachNameListsEverything: the getdents listing returns exactly the names os.ReadDir does
// (no "." or ".."), over a directory that takes several getdents buffers.
func TestEachNameListsEverything(t *testing.T) {
	dir := t.TempDir()
	want := []string{}
	for i := range 3000 { // 3,000 names of 64 bytes: about four 64 KiB buffers
		name := fmt.Sprintf("%064x", i*7919)
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o400); err != nil {
			t.Fatal(err)
		}
		want = append(want, name)
	}
	want = append(want, "short", "a name with spaces")
	for _, name := range want[3000:] {
		if err := os.Mkdir(filepath.Join(dir, name), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	for range 2 { // the held descriptor's offset is not consumed: a second listing is whole
		got, err := listDir(fd, "dir")
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("listed %d names, want %d", len(got), len(want))
		}
	}
}

// TestOpenRO: openRO opens without following a symlink, reports ENOENT as such, and opens a
// short name without allocating (log verify opens three files per publication).
func TestOpenRO(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o400); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("f", filepath.Join(dir, "l")); err != nil {
		t.Fatal(err)
	}
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dfd)
	if _, err := openRO(dfd, "l"); err != unix.ELOOP {
		t.Fatalf("open a symlink: %v, want ELOOP", err)
	}
	if _, err := openRO(dfd, "missing"); err != unix.ENOENT {
		t.Fatalf("open a missing file: %v, want ENOENT", err)
	}
	if _, err := openRO(dfd, "f\x00x"); err == nil {
		t.Fatal("a name with a NUL opened")
	}
	allocs := testing.AllocsPerRun(100, func() {
		fd, err := openRO(dfd, "f")
		if err != nil {
			t.Fatal(err)
		}
		unix.Close(fd)
	})
	if allocs != 0 {
		t.Fatalf("openRO allocates %v times a call", allocs)
	}
}

// FuzzParseNameBytes: the listing's parser of leaf and checkpoint names accepts exactly what
// parseName accepts, with the same value.
func FuzzParseNameBytes(f *testing.F) {
	for _, s := range []string{"00000000000000000000", "00000000000000000255", "09223372036854775807",
		"09223372036854775808", "99999999999999999999", "0000000000000000000x", "0000000000000000001", "+0000000000000000001"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n, ok := parseNameBytes(b)
		m, ok2 := parseName(string(b))
		if ok != ok2 || (ok && n != m) {
			t.Fatalf("%q: parseNameBytes %d %v, parseName %d %v", b, n, ok, m, ok2)
		}
		if ok {
			var buf [20]byte
			putPad20(buf[:], n)
			if string(buf[:]) != string(b) {
				t.Fatalf("%q: putPad20 gives %q", b, buf[:])
			}
		}
	})
}
