package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestHeavyTestsExist: make test runs each test of RACE_PKGS once, under the race detector
// (go test -race -skip HEAVY_TESTS) or, for the names in HEAVY_TESTS, without it in HEAVY_PKGS
// (go test -run HEAVY_TESTS). A name that no test of HEAVY_PKGS has is a typo or a renamed
// test, which then runs under the detector after all, or, moved to another package, nowhere.
func TestHeavyTestsExist(t *testing.T) {
	mk, err := os.ReadFile("Makefile")
	if err != nil {
		t.Fatal(err)
	}
	names := regexp.MustCompile(`(?m)^HEAVY_TESTS\s*\?=\s*\^\((.*)\)\$\$$`).FindSubmatch(mk)
	pkgs := regexp.MustCompile(`(?m)^HEAVY_PKGS\s*\?=\s*(.*)$`).FindSubmatch(mk)
	if names == nil || pkgs == nil {
		t.Fatal("the Makefile has no HEAVY_TESTS ?= ^(A|B)$$ or HEAVY_PKGS ?= line")
	}
	defined := map[string]bool{}
	fn := regexp.MustCompile(`(?m)^func (Test\w+)\(t \*testing\.T\)`)
	for _, pkg := range strings.Fields(string(pkgs[1])) {
		files, _ := filepath.Glob(filepath.Join(pkg, "*_test.go"))
		if len(files) == 0 {
			t.Errorf("HEAVY_PKGS names %s, which has no tests", pkg)
		}
		for _, f := range files {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range fn.FindAllSubmatch(src, -1) {
				defined[string(m[1])] = true
			}
		}
	}
	for _, name := range strings.Split(string(names[1]), "|") {
		if !defined[name] {
			t.Errorf("HEAVY_TESTS names %s, which no test of HEAVY_PKGS (%s) defines", name, pkgs[1])
		}
	}
}
