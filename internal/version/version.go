// Package version is the version tallyd and tallyctl report: one number for both binaries.
package version

import (
	"runtime/debug"
	"strings"
)

// base is the release this source tree is.
const base = "0.1.0"

// Tag, when a build sets it, is the version:
// go build -ldflags "-X github.com/tallyd/tallyd/internal/version.Tag=0.2.0" (make VERSION=0.2.0).
var Tag string

// String returns Tag, else the module version the go command stamped into the binary
// (go install github.com/tallyd/tallyd/cmd/tallyctl@v0.2.0), else the tree's own number.
func String() string {
	if Tag != "" {
		return strings.TrimPrefix(Tag, "v")
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			return strings.TrimPrefix(v, "v")
		}
	}
	return base
}
