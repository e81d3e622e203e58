//go:build ignore

// Testlog reads `go test -json` and prints what plain `go test` would (each package's
// result line, and the output of the tests that failed), saving every event to a file;
// with -slowest it reads saved files and prints the slowest packages and tests.
//
//	go test -json ./... | go run scripts/testlog.go -save out/unit.json
//	go run scripts/testlog.go -slowest 20 out/*.json
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// event is one line of `go test -json` (see `go doc test2json`).
type event struct {
	Action  string
	Package string
	Test    string  `json:",omitempty"`
	Elapsed float64 `json:",omitempty"`
	Output  string  `json:",omitempty"`
}

func main() {
	save := flag.String("save", "", "file to append the events to while echoing them as plain go test does")
	slowest := flag.Int("slowest", 0, "print this many of the slowest tests in the files named")
	flag.Parse()
	switch {
	case *save != "":
		ok, err := echo(os.Stdin, os.Stdout, *save)
		if err != nil {
			fmt.Fprintln(os.Stderr, "testlog:", err)
			os.Exit(2)
		}
		if !ok {
			os.Exit(1)
		}
	case *slowest > 0:
		if err := report(os.Stdout, *slowest, flag.Args()); err != nil {
			fmt.Fprintln(os.Stderr, "testlog:", err)
			os.Exit(2)
		}
	default:
		fmt.Fprintln(os.Stderr, "usage: testlog -save FILE < go-test-json | testlog -slowest N FILE...")
		os.Exit(2)
	}
}

// echo copies the events of r to the file named save and prints to w the package lines,
// the output outside tests, and the whole output of each test that failed. It reports
// whether nothing failed.
func echo(r io.Reader, w io.Writer, save string) (bool, error) {
	f, err := os.OpenFile(save, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return false, err
	}
	defer f.Close()
	ok := true
	held := map[string]*strings.Builder{} // a running top-level test's output, subtests' included
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			fmt.Fprintf(w, "%s\n", line) // not an event: a build error, say
			continue
		}
		if _, err := f.Write(append(line, '\n')); err != nil {
			return false, err
		}
		top, _, _ := strings.Cut(e.Test, "/")
		key := e.Package + " " + top
		sub := strings.Contains(e.Test, "/")
		switch {
		case e.Action == "output" && e.Test == "":
			if !strings.HasPrefix(e.Output, "=== ") && e.Output != "PASS\n" {
				io.WriteString(w, e.Output)
			}
		case e.Action == "output":
			b := held[key]
			if b == nil {
				b = &strings.Builder{}
				held[key] = b
			}
			b.WriteString(e.Output)
		case e.Action == "fail" || e.Action == "build-fail":
			ok = false
			if b := held[key]; b != nil && e.Test != "" && !sub {
				io.WriteString(w, b.String())
				delete(held, key)
			}
			if e.Test == "" { // the package ended (a panic, a timeout): what its tests said
				for k, b := range held {
					if strings.HasPrefix(k, e.Package+" ") {
						io.WriteString(w, b.String())
						delete(held, k)
					}
				}
			}
		case e.Action == "build-output":
			io.WriteString(w, e.Output)
		case e.Action == "pass" || e.Action == "skip":
			if !sub {
				delete(held, key)
			}
		}
	}
	return ok, sc.Err()
}

// timing is how long a package or a test took in one file.
type timing struct {
	name    string
	elapsed float64
	file    string
}

// report prints the n slowest packages and top-level tests of the files named.
func report(w io.Writer, n int, files []string) error {
	var pkgs, tests []timing
	// A package run more than once in a file (fuzz.sh runs one target at a time) is summed.
	pkgAt := map[string]int{} // file and package: index in pkgs
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			return err
		}
		short := strings.TrimSuffix(name[strings.LastIndexByte(name, '/')+1:], ".json")
		for _, line := range strings.Split(string(data), "\n") {
			var e event
			if line == "" || json.Unmarshal([]byte(line), &e) != nil {
				continue
			}
			if e.Action != "pass" && e.Action != "fail" {
				continue
			}
			pkg := strings.TrimPrefix(e.Package, "github.com/tallyd/tallyd/")
			switch {
			case e.Test == "":
				if i, ok := pkgAt[short+" "+pkg]; ok {
					pkgs[i].elapsed += e.Elapsed
					continue
				}
				pkgAt[short+" "+pkg] = len(pkgs)
				pkgs = append(pkgs, timing{pkg, e.Elapsed, short})
			case !strings.Contains(e.Test, "/"):
				tests = append(tests, timing{pkg + " " + e.Test, e.Elapsed, short})
			}
		}
	}
	print := func(title string, ts []timing, n int) {
		sort.SliceStable(ts, func(i, j int) bool { return ts[i].elapsed > ts[j].elapsed })
		fmt.Fprintf(w, "%s:\n", title)
		for i, t := range ts {
			if i == n {
				break
			}
			fmt.Fprintf(w, "%8.1fs  %-6s %s\n", t.elapsed, t.file, t.name)
		}
	}
	print("slowest packages", pkgs, n)
	print("slowest tests", tests, n)
	return nil
}
