package loop

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// The Makefile's HEAVY_LOOP_TESTS names exactly the tests that call skipHeavyUnderRace: a
// test skipped under the detector and not named there would run nowhere in make test.
func TestHeavyTestsRunSomewhere(t *testing.T) {
	mk, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^HEAVY_LOOP_TESTS \?= \^\((.*)\)\$\$$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("the Makefile has no HEAVY_LOOP_TESTS ?= ^(A|B)$$ line")
	}
	named := strings.Split(string(m[1]), "|")
	files, _ := filepath.Glob("*_test.go")
	fn := regexp.MustCompile(`(?m)^func (Test\w+)\(t \*testing\.T\) \{\n\tskipHeavyUnderRace\(t\)`)
	var calling []string
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range fn.FindAllSubmatch(src, -1) {
			calling = append(calling, string(c[1]))
		}
	}
	sort.Strings(named)
	sort.Strings(calling)
	if strings.Join(named, "|") != strings.Join(calling, "|") {
		t.Errorf("HEAVY_LOOP_TESTS names %v; the tests that skip under the race detector are %v", named, calling)
	}
}
