package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docPages are the Markdown pages whose links TestDocLinks checks.
func docPages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob("docs/*.md")
	if err != nil || len(pages) < 10 {
		t.Fatalf("docs/*.md: %v %v", pages, err)
	}
	return append([]string{"README.md"}, pages...)
}

// mdLink is a Markdown link's target, mdFence a code block's fence, mdPunct what an anchor drops.
var (
	mdLink  = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	mdFence = regexp.MustCompile("^```")
	mdPunct = regexp.MustCompile(`[^\w\- ]`)
)

// anchors returns the GitHub anchors of page's headings (outside code blocks).
func anchors(page string) map[string]bool {
	a := map[string]bool{}
	code := false
	for _, l := range strings.Split(page, "\n") {
		if mdFence.MatchString(l) {
			code = !code
			continue
		}
		if code || !strings.HasPrefix(l, "#") {
			continue
		}
		h := strings.ToLower(strings.TrimSpace(strings.TrimLeft(l, "#")))
		h = mdPunct.ReplaceAllString(h, "")
		a[strings.ReplaceAll(h, " ", "-")] = true
	}
	return a
}

// Every relative link in README.md and docs/ names a file that exists and, with #anchor, a
// heading of that file: the pages cite each other's sections, and a moved heading breaks them.
func TestDocLinks(t *testing.T) {
	for _, page := range docPages(t) {
		text := readFile(t, page)
		for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), file)
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s links to %s: %v", page, target, err)
					continue
				}
			}
			if anchor != "" && !anchors(readFile(t, path))[anchor] {
				t.Errorf("%s links to %s: %s has no heading #%s", page, target, path, anchor)
			}
		}
	}
}

// README.md stays a short front page: what tallyd is, the quick start, a map of docs/.
func TestReadmeShort(t *testing.T) {
	readme := readFile(t, "README.md")
	if n := strings.Count(readme, "\n"); n > 220 {
		t.Errorf("README.md has %d lines; keep it near 200 and move the rest to docs/", n)
	}
	head := strings.Join(strings.SplitN(readme, "\n", 50)[:49], "\n")
	for _, want := range []string{"make run", "make test", "redis-cli -p 5658"} {
		if !strings.Contains(head, want) {
			t.Errorf("README.md's first screen (49 lines) does not show %q", want)
		}
	}
	for _, page := range docPages(t)[1:] {
		if !strings.Contains(readme, "(docs/"+filepath.Base(page)) {
			t.Errorf("README.md's map does not link %s", page)
		}
	}
}

// docs/operations.md is long: its contents list names every section, in order, with a
// working anchor, so a section added without an entry fails here.
func TestOperationsContents(t *testing.T) {
	page := readFile(t, "docs/operations.md")
	head, _, ok := strings.Cut(page, "\n## ")
	if !ok {
		t.Fatal("docs/operations.md has no section")
	}
	var want []string
	code := false
	for _, l := range strings.Split(page, "\n") {
		if mdFence.MatchString(l) {
			code = !code
			continue
		}
		if code || !strings.HasPrefix(l, "##") {
			continue
		}
		level := len(l) - len(strings.TrimLeft(l, "#"))
		h := strings.TrimSpace(l[level:])
		a := strings.ReplaceAll(mdPunct.ReplaceAllString(strings.ToLower(h), ""), " ", "-")
		want = append(want, strings.Repeat("  ", level-2)+"- ["+h+"](#"+a+")")
	}
	var got []string
	for _, l := range strings.Split(head, "\n") {
		if strings.HasPrefix(strings.TrimLeft(l, " "), "- [") {
			got = append(got, l)
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("docs/operations.md's contents list:\n%s\nits sections:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
