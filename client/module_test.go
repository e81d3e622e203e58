package client_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestClientFromAnotherModule builds client/examples/hello, the program docs/client.md shows, in a
// module of its own that requires github.com/tallyd/tallyd (replaced by this checkout, and
// offline: GOPROXY=off, the dependencies from the module cache), and runs it against a
// tallyd: the client is importable by other modules, and the page's program works (issue 15
// item 4: the module path was "tallyd", which no other module can import).
func TestClientFromAnotherModule(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	const modPath = "github.com/tallyd/tallyd"
	if !strings.HasPrefix(string(gomod), "module "+modPath+"\n") {
		t.Fatalf("go.mod does not declare module %s:\n%.80s", modPath, gomod)
	}
	goLine := regexp.MustCompile(`(?m)^go \S+$`).Find(gomod)
	if goLine == nil {
		t.Fatal("go.mod has no go line")
	}
	dir := t.TempDir()
	src, err := os.ReadFile(filepath.Join(root, "client", "examples", "hello", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"main.go": string(src),
		"go.sum":  string(sum), // the checksums of the dependencies it shares with tallyd
		"go.mod": "module example.com/hello\n\n" + string(goLine) + "\n\nrequire " + modPath + " v0.0.0\n\n" +
			"replace " + modPath + " => " + root + "\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin := filepath.Join(dir, "hello")
	build := exec.CommandContext(ctx, goBin, "build", "-o", bin, ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOPROXY=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build in a module of its own: %v\n%s\ngo.mod:\n%s", err, out, files["go.mod"])
	}

	s := startTallyd(t, "a", nil)
	for run := 1; run <= 2; run++ {
		out, err := exec.CommandContext(ctx, bin, "-counter", s.Counter, "-pool", s.Pool, "-slock", s.Slock).CombinedOutput()
		if err != nil {
			t.Fatalf("hello: %v\n%s", err, out)
		}
		want := "holding printer at " + s.Counter + "\nrendering under the PoolCounter lock\nhello:runs is now " +
			string(rune('0'+run)) + "\n"
		if string(out) != want {
			t.Fatalf("hello, run %d, printed:\n%s\nwant:\n%s", run, out, want)
		}
	}
}

// TestReadmeShowsHello: docs/client.md's complete program is client/examples/hello, which
// TestClientFromAnotherModule builds and runs, so the page's copy cannot rot.
func TestReadmeShowsHello(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("examples", "hello", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join("..", "docs", "client.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, prog, ok := strings.Cut(string(src), "package main\n")
	if !ok {
		t.Fatal("hello has no package clause")
	}
	if !strings.Contains(string(readme), "```go\npackage main\n"+prog+"```\n") {
		t.Error("docs/client.md does not show client/examples/hello/main.go (from its package clause) in a go block: copy it again")
	}
	if !strings.Contains(string(readme), "go get github.com/tallyd/tallyd/client\n") {
		t.Error("docs/client.md does not show go get github.com/tallyd/tallyd/client")
	}
}
