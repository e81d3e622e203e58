package e2e

// The docs run as written: every shell session in README.md and docs/*.md marked with
// <!-- runnable ... --> on the line before its fence is typed into one bash, command by
// command, against a tallyd the test starts (as "make run in another terminal"), and what each
// command prints is compared with what the page shows.
//
// A marked block is a transcript: a line "$ CMD" is a command (with the lines after it while
// bash says the command is unfinished: a trailing \, an open for or quote), the lines up to the
// next "$ " are what it prints (stdout and stderr), and a line "..." stands for any number of
// lines. The marker's words:
//
//	no-server      the block starts its own tallyd (the test starts none)
//	server=A,B     the test's tallyd gets the arguments A B (as "bin/tallyd A B")
//	numbers        a run of digits matches any run of digits (uptimes, terms, PIDs)
//	status         the output shown is an example: only each command's exit status counts
//
// Each block runs in network, mount and PID namespaces of its own (lo up, a tmpfs on /tmp), so the
// pages' default ports and /tmp paths are used as written, beside any other test, and in a
// directory holding bin/tallyd, bin/tallyctl and scripts/ as a checkout after `make build`
// does; redis-cli prints as at a terminal (see setup below). tallyctl is not on PATH: a page that says `tallyctl` must mean an installed one.

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// docBlock is one marked transcript of a page.
type docBlock struct {
	page, marker string
	line         int // the fence's line, 1-based
	cmds         []docCmd
}

type docCmd struct {
	text string   // as bash gets it, continuation lines included
	want []string // the lines the page shows after it
	line int
}

var runnableMarker = regexp.MustCompile(`^<!-- runnable(?::\s*(.*?))?\s*-->$`)

// docBlocks returns every marked block of README.md and docs/*.md.
func docBlocks(t *testing.T) []docBlock {
	t.Helper()
	pages, _ := filepath.Glob("../docs/*.md")
	pages = append([]string{"../README.md"}, pages...)
	var blocks []docBlock
	for _, page := range pages {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(data), "\n")
		for i := 0; i < len(lines); i++ {
			m := runnableMarker.FindStringSubmatch(strings.TrimSpace(lines[i]))
			if m == nil {
				continue
			}
			if i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "```") {
				t.Errorf("%s:%d: a runnable marker must stand on the line before a code fence", page, i+1)
				continue
			}
			b := docBlock{page: strings.TrimPrefix(page, "../"), marker: m[1], line: i + 2}
			j := i + 2
			var body []string
			for ; j < len(lines) && !strings.HasPrefix(lines[j], "```"); j++ {
				body = append(body, lines[j])
			}
			b.cmds = parseTranscript(t, body, b.line+1)
			if len(b.cmds) == 0 {
				t.Errorf("%s:%d: a runnable block without a \"$ \" command", page, b.line)
			}
			blocks = append(blocks, b)
			i = j
		}
	}
	return blocks
}

// parseTranscript splits a block's lines into commands and their shown output.
func parseTranscript(t *testing.T, body []string, first int) []docCmd {
	var cmds []docCmd
	for i := 0; i < len(body); i++ {
		l := body[i]
		if !strings.HasPrefix(l, "$ ") {
			if len(cmds) == 0 {
				t.Errorf("line %d: output before any command: %q", first+i, l)
				continue
			}
			c := &cmds[len(cmds)-1]
			c.want = append(c.want, l)
			continue
		}
		c := docCmd{text: strings.TrimPrefix(l, "$ "), line: first + i}
		for !bashComplete(c.text) && i+1 < len(body) {
			i++
			c.text += "\n" + body[i]
		}
		cmds = append(cmds, c)
	}
	return cmds
}

// bashComplete says whether bash parses cmd as a whole command (bash -n).
func bashComplete(cmd string) bool {
	if strings.HasSuffix(cmd, "\\") {
		return false
	}
	return exec.Command("bash", "-n", "-c", cmd).Run() == nil
}

var digitRun = regexp.MustCompile(`[0-9]+`)

// matchTranscript compares what a command printed with what the page shows ("..." matches
// any number of lines; with numbers, digit runs match any digit run).
func matchTranscript(want, got []string, numbers bool) bool {
	norm := func(s string) string {
		s = strings.TrimRight(s, " ")
		if numbers {
			s = digitRun.ReplaceAllString(s, "0")
		}
		return s
	}
	var m func(w, g int) bool
	m = func(w, g int) bool {
		if w == len(want) {
			return g == len(got)
		}
		if strings.TrimSpace(want[w]) == "..." {
			for k := g; k <= len(got); k++ {
				if m(w+1, k) {
					return true
				}
			}
			return false
		}
		return g < len(got) && norm(want[w]) == norm(got[g]) && m(w+1, g+1)
	}
	return m(0, 0)
}

func TestMatchTranscript(t *testing.T) {
	for _, c := range []struct {
		want, got string
		numbers   bool
		ok        bool
	}{
		{"a\nb", "a\nb", false, true},
		{"a\nb", "a\nc", false, false},
		{"a\n...\nd", "a\nb\nc\nd", false, true},
		{"a\n...\nd", "a\nd", false, true},
		{"a\n...\nd", "a\nb", false, false},
		{"up 12", "up 3", true, true},
		{"up 12", "up 3", false, false},
		{"", "", false, true},
		{"", "x", false, false},
	} {
		split := func(s string) []string {
			if s == "" {
				return nil
			}
			return strings.Split(s, "\n")
		}
		if got := matchTranscript(split(c.want), split(c.got), c.numbers); got != c.ok {
			t.Errorf("match(%q, %q, %v) = %v", c.want, c.got, c.numbers, got)
		}
	}
	cmds := parseTranscript(t, []string{"$ for i in 1 2; do", "    echo $i", "  done", "1", "2", "$ echo x \\", "  y", "x y"}, 1)
	if len(cmds) != 2 || len(cmds[0].want) != 2 || !strings.Contains(cmds[1].text, "y") {
		t.Errorf("parseTranscript: %+v", cmds)
	}
}

func TestDocsRunAsWritten(t *testing.T) {
	t.Parallel() // each block has namespaces of its own, and mostly waits on its commands
	if os.Geteuid() != 0 {
		t.Skip("needs root for its network and mount namespaces (unshare)")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare (util-linux)")
	}
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Skip("no redis-cli: scripts/ensure-redis-tools.sh installs it")
	}
	blocks := docBlocks(t)
	if len(blocks) < 1 {
		t.Fatalf("only %d runnable blocks in the docs", len(blocks))
	}
	// A checkout after `make build`: bin/tallyd, bin/tallyctl, scripts/.
	// Outside /tmp, which each block's shell covers with a tmpfs of its own (a working
	// directory the shell cannot reach by its path breaks programs that cd to $PWD).
	root, err := os.MkdirTemp("/var/tmp", "tallyd-docs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	if err = os.MkdirAll(filepath.Join(root, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Copies and relative links: the block's tmpfs on /tmp hides every path under /tmp.
	if err := os.Link(binPath, filepath.Join(root, "bin", "tallyd")); err != nil {
		data, err := os.ReadFile(binPath)
		if err == nil {
			err = os.WriteFile(filepath.Join(root, "bin", "tallyd"), data, 0o755)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command("go", "build", "-o", filepath.Join(root, "bin", "tallyctl"), "github.com/tallyd/tallyd/cmd/tallyctl").CombinedOutput(); err != nil {
		t.Fatalf("build tallyctl: %v\n%s", err, out)
	}
	// A copy, not a link: the checkout itself may be under /tmp (CI's clone can be).
	if err := os.CopyFS(filepath.Join(root, "scripts"), os.DirFS("../scripts")); err != nil {
		t.Fatal(err)
	}
	for _, b := range blocks {
		b := b
		t.Run(fmt.Sprintf("%s:%d", b.page, b.line), func(t *testing.T) {
			dir := filepath.Join(root, fmt.Sprintf("run%d-%s", b.line, strings.NewReplacer("/", "_", ".", "_").Replace(b.page)))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for _, e := range []string{"bin", "scripts"} {
				if err := os.Symlink(filepath.Join("..", e), filepath.Join(dir, e)); err != nil {
					t.Fatal(err)
				}
			}
			runDocBlock(t, dir, b)
		})
	}
}

// runDocBlock types b's commands into one bash in namespaces of its own, in dir.
func runDocBlock(t *testing.T, dir string, b docBlock) {
	words := strings.Fields(b.marker)
	has := func(w string) bool {
		for _, x := range words {
			if x == w {
				return true
			}
		}
		return false
	}
	var serverArgs []string
	for _, w := range words {
		if v, ok := strings.CutPrefix(w, "server="); ok {
			serverArgs = strings.Split(v, ",")
		}
	}
	outDir := filepath.Join(dir, ".out")
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		t.Fatal(err)
	}
	// The shell's own set-up, then a line per command read from stdin: each command's output
	// goes to its own file (a background process it starts keeps writing there, not into the
	// next command's), and its status to the status pipe.
	setup := `set +m; mount --make-rprivate / && mount -t tmpfs tmpfs /tmp && ip link set lo up || exit 97
export HOME=` + dir + ` TERM=dumb
`
	// A PID namespace too, with bash as its init: when the test kills unshare, --kill-child
	// kills bash, and with it the kernel kills everything the block started.
	cmd := exec.Command("unshare", "--net", "--mount", "--pid", "--fork", "--kill-child", "--mount-proc", "--", "bash", "--norc", "--noprofile", "-c", setup+`exec bash --norc --noprofile`)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PS1=", "PS2=")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuf
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := false
	t.Cleanup(func() {
		if !done {
			stdin.Close()
		}
		// Everything the block started dies with the namespace's init (--fork's child).
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	status := bufio.NewReader(stdout)
	fmt.Fprintf(stdin, "%s\n", shellFuncs)
	// run sends one command and waits for its status; the shell prints "__rc N" when done.
	run := func(text string, n int, timeout time.Duration) (int, []string) {
		t.Helper()
		out := filepath.Join(outDir, strconv.Itoa(n))
		// A relative path: the shell's /tmp is its own tmpfs, and dir is under the test's /tmp.
		fmt.Fprintf(stdin, "{ %s\n} >.out/%d 2>&1 </dev/null; echo \"__rc $?\"\n", text, n)
		type res struct {
			line string
			err  error
		}
		ch := make(chan res, 1)
		go func() {
			l, err := status.ReadString('\n')
			ch <- res{l, err}
		}()
		select {
		case r := <-ch:
			if r.err != nil {
				t.Fatalf("the shell ended: %v (stderr %q)", r.err, stderr.String())
			}
			rc, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(r.line, "__rc ")))
			data, _ := os.ReadFile(out)
			s := strings.TrimSuffix(string(data), "\n")
			if s == "" {
				return rc, nil
			}
			return rc, strings.Split(s, "\n")
		case <-time.After(timeout):
			t.Fatalf("%s:%d: %q still running after %v", b.page, n, text, timeout)
			return 0, nil
		}
	}
	if !has("no-server") {
		// As `make run` (./bin/tallyd, data in ./data) in another terminal; ready once the
		// slock port answers a PING.
		args := strings.Join(append([]string{"bin/tallyd"}, serverArgs...), " ")
		if rc, out := run(args+" >.out/server.log 2>&1 &", 0, 10*time.Second); rc != 0 {
			t.Fatalf("start %s: %d %q", args, rc, out)
		}
		if rc, out := run(`(for i in $(seq 100); do [ "$(redis-cli -p 5658 PING 2>/dev/null)" = PONG ] && exit 0; sleep 0.1; done; cat .out/server.log; false)`, -1, 20*time.Second); rc != 0 {
			t.Fatalf("the server did not answer: %q", out)
		}
	}
	for _, c := range b.cmds {
		rc, got := run(c.text, c.line, 60*time.Second)
		if backgroundJob.MatchString(stripComment(c.text)) {
			// What a background job prints comes later, into its own file; give it the
			// second a person takes to type the next command.
			time.Sleep(time.Second)
			continue
		}
		if has("status") {
			// The output shown is an example; the command must succeed.
			if rc != 0 {
				t.Errorf("%s:%d: %q exited %d:\n%s", b.page, c.line, c.text, rc, strings.Join(got, "\n"))
			}
			continue
		}
		// The page shows what the command prints, not its status (timeout 1 cat exits 124).
		if !matchTranscript(c.want, got, has("numbers")) {
			t.Errorf("%s:%d: %q (exit %d) printed\n%s\nthe page shows\n%s", b.page, c.line, c.text, rc, strings.Join(got, "\n"), strings.Join(c.want, "\n"))
		}
	}
	stdin.Close()
	done = true
}

// stripComment drops a trailing "# ..." comment of a one-line command (outside quotes, good
// enough for the pages' commands).
func stripComment(cmd string) string {
	inQ := byte(0)
	for i := 0; i < len(cmd); i++ {
		c := cmd[i]
		switch {
		case inQ != 0 && c == inQ:
			inQ = 0
		case inQ == 0 && (c == '\'' || c == '"'):
			inQ = c
		case inQ == 0 && c == '#' && (i == 0 || cmd[i-1] == ' '):
			return cmd[:i]
		}
	}
	return cmd
}

// shellFuncs are defined in each block's shell before its commands.
const shellFuncs = `# redis-cli formats its replies for a terminal and prints bare values into a pipe; the pages
# show what a person sees at a terminal, and each command's output here goes to a file.
redis-cli() { if [ -p /dev/stdout ]; then command redis-cli "$@"; else command redis-cli --no-raw "$@"; fi; }
`

// backgroundJob finds a command's "&" that puts a job in the background (not &&, >&, <&, &>).
var backgroundJob = regexp.MustCompile(`(^|[^&<>])&($|[^&>])`)
