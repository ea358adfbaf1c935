package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

var (
	mdLink      = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)\)`)
	mdHeading   = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	htmlAnchor  = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	mdLinkText  = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	goDocTarget = regexp.MustCompile(`docs/([a-z0-9-]+\.md)(#[a-z0-9-]+)?`)
)

// anchors are the fragment names of a markdown file's headings as GitHub renders them: lower
// case, link syntax reduced to its text, every character but letters, digits, spaces, hyphens and
// underscores dropped, spaces made hyphens; a repeated heading gets -1, -2, ….
func anchors(md string) map[string]bool {
	got := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			got[m[1]] = true
		}
		m := mdHeading.FindStringSubmatch(line)
		if fenced || m == nil {
			continue
		}
		text := mdLinkText.ReplaceAllString(m[1], "$1")
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteByte('-')
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			got[a+"-"+itoa(n)] = true
		} else {
			got[a] = true
		}
		seen[a]++
	}
	return got
}

func itoa(n int) string {
	s := ""
	for ; n > 0; n /= 10 {
		s = string(rune('0'+n%10)) + s
	}
	return s
}

// TestDocLinksResolve: every relative link in README.md and docs/*.md names a file of the
// repository and, with a fragment, a heading of that file; every docs/<page>.md#<anchor> a Go
// comment cites (the rationale §N and issue references) does too.
func TestDocLinksResolve(t *testing.T) {
	root := filepath.Join("..", "..")
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(pages) < 10 {
		t.Fatalf("docs/*.md: %d pages (%v)", len(pages), err)
	}
	pages = append(pages, filepath.Join(root, "README.md"))
	cache := map[string]map[string]bool{}
	resolve := func(from, target string) string {
		file, frag, _ := strings.Cut(target, "#")
		path := from
		if file != "" {
			path = filepath.Join(filepath.Dir(from), file)
		}
		st, err := os.Stat(path)
		if err != nil {
			return "no such file " + path
		}
		if frag == "" {
			return ""
		}
		if st.IsDir() || !strings.HasSuffix(path, ".md") {
			return "a fragment on " + path + ", which is no markdown page"
		}
		if cache[path] == nil {
			b, err := os.ReadFile(path)
			if err != nil {
				return err.Error()
			}
			cache[path] = anchors(string(b))
		}
		if !cache[path][frag] {
			return "no heading #" + frag + " in " + path
		}
		return ""
	}
	links := 0
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		fenced := false
		for i, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "```") {
				fenced = !fenced
			}
			if fenced {
				continue
			}
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				links++
				if why := resolve(page, target); why != "" {
					t.Errorf("%s:%d: link %s: %s", page, i+1, target, why)
				}
			}
		}
	}
	cited := 0
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") && path != root) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range goDocTarget.FindAllStringSubmatch(string(b), -1) {
			cited++
			if why := resolve(filepath.Join(root, "docs", "x.md"), m[1]+m[2]); why != "" {
				t.Errorf("%s: cites docs/%s%s: %s", path, m[1], m[2], why)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if links < 50 || cited < 20 {
		t.Fatalf("only %d links and %d citations checked: the scan is broken", links, cited)
	}
	t.Logf("%d links in %d pages, %d citations in Go comments", links, len(pages), cited)
}
