//go:build ignore

// Mkimage builds tallyd's container image from binaries already built (statically, with
// CGO_ENABLED=0) as an OCI archive, without a registry, a daemon or a base image: the
// Dockerfile's final stage gives the settings (user, entrypoint, ports, volume, health
// check, labels), deploy/image/ the /etc/passwd and /etc/group. `make image` runs it:
//
//	go run scripts/mkimage.go -bin bin -o out/image/tallyd.oci.tar
//
// Load it with `podman load -i out/image/tallyd.oci.tar` or `skopeo copy
// oci-archive:out/image/tallyd.oci.tar docker-daemon:tallyd:latest`. Time stamps are
// SOURCE_DATE_EPOCH (default 0), so the same binaries give the same archive.
package main

import (
	"bytes"
	"debug/elf"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/tallyd/tallyd/internal/ociimage"
)

func main() {
	dockerfile := flag.String("dockerfile", "Dockerfile", "the Dockerfile whose final stage gives the image's settings")
	etc := flag.String("etc", "deploy/image", "the directory of the image's passwd and group files")
	bin := flag.String("bin", "bin", "the directory of the static tallyd and tallyctl binaries")
	out := flag.String("o", "out/image/tallyd.oci.tar", "the OCI archive to write")
	ref := flag.String("ref", "latest", "the image's tag inside the archive")
	flag.Parse()
	if err := run(*dockerfile, *etc, *bin, *out, *ref); err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}

func run(dockerfile, etc, bin, out, ref string) error {
	df, err := os.ReadFile(dockerfile)
	if err != nil {
		return err
	}
	cfg, err := ociimage.ParseDockerfile(bytes.NewReader(df))
	if err != nil {
		return err
	}
	uid, gid, err := numericUser(cfg.User)
	if err != nil {
		return err
	}
	var files []ociimage.File
	for _, name := range []string{"tallyd", "tallyctl"} {
		p := filepath.Join(bin, name)
		if err := static(p); err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files = append(files, ociimage.File{Name: "/usr/local/bin/" + name, Mode: 0o755, Data: b})
	}
	for _, name := range []string{"passwd", "group"} {
		b, err := os.ReadFile(filepath.Join(etc, name))
		if err != nil {
			return err
		}
		files = append(files, ociimage.File{Name: "/etc/" + name, Mode: 0o644, Data: b})
	}
	files = append(files, ociimage.File{Name: "/tmp", Mode: fs.ModeDir | fs.ModeSticky | 0o777})
	// The volumes and the working directory belong to the image's user, as the Dockerfile's
	// `install -d -o` makes them.
	dirs := map[string]bool{}
	for v := range cfg.Volumes {
		dirs[v] = true
	}
	if cfg.WorkingDir != "" {
		dirs[cfg.WorkingDir] = true
	}
	for d := range dirs {
		files = append(files, ociimage.File{Name: d, Mode: fs.ModeDir | 0o700, UID: uid, GID: gid})
	}
	created := time.Unix(0, 0)
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("SOURCE_DATE_EPOCH %q is not a number of seconds", s)
		}
		created = time.Unix(n, 0)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(out), ".mkimage-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := ociimage.Write(f, ref, cfg, files, created); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), out); err != nil {
		return err
	}
	fmt.Printf("mkimage: wrote %s (user %s, entrypoint %s)\n", out, cfg.User, strings.Join(cfg.Entrypoint, " "))
	return nil
}

// numericUser reads USER as UID:GID: a scratch image has no passwd lookup at run time
// that Kubernetes' runAsNonRoot could check, so the user must be numeric and not root.
func numericUser(user string) (int, int, error) {
	u, g, ok := strings.Cut(user, ":")
	uid, err1 := strconv.Atoi(u)
	gid, err2 := strconv.Atoi(g)
	if !ok || err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("Dockerfile USER %q is not numeric UID:GID", user)
	}
	if uid == 0 {
		return 0, 0, fmt.Errorf("Dockerfile USER %q is root", user)
	}
	return uid, gid, nil
}

// static refuses a binary that needs a dynamic loader, which an image without a libc lacks.
func static(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("%s: %v (build it with CGO_ENABLED=0)", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked (it has a PT_INTERP): build it with CGO_ENABLED=0", path)
		}
	}
	return nil
}
