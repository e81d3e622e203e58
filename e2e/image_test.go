package e2e

// The container image of `make image` (issue 24): its configuration as our reader and as
// skopeo see it, its rootfs as umoci unpacks it, and the binary from that rootfs run as the
// image's user: static, answering PING on the slock port, writing its data dir, stopping on
// SIGTERM. Podman cannot run containers in this sandbox (crun's setrlimit is refused), so the
// binary runs as a plain process with the image's user, working dir and arguments.

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tallyd/tallyd/internal/ociimage"
)

// imageUID is the Dockerfile's USER: numeric, so that Kubernetes' runAsNonRoot can check it.
const imageUID = 65532

func TestContainerImage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	archive := filepath.Join(dir, "tallyd.oci.tar")
	mk := exec.Command("make", "--no-print-directory", "-C", "..", "image", "IMAGE="+archive, "IMAGEBIN="+filepath.Join(dir, "bin"))
	if out, err := mk.CombinedOutput(); err != nil {
		t.Fatalf("make image: %v\n%s", err, out)
	}
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	img, err := ociimage.Read(f)
	f.Close()
	if err != nil {
		t.Fatalf("read %s: %v", archive, err)
	}
	c := img.Config
	if img.OS != "linux" || img.RefName != "latest" {
		t.Errorf("os %q, tag %q; want linux, latest", img.OS, img.RefName)
	}
	if c.User != fmt.Sprintf("%d:%d", imageUID, imageUID) {
		t.Errorf("User %q; want %d:%d (numeric, not root)", c.User, imageUID, imageUID)
	}
	if want := []string{"/usr/local/bin/tallyd"}; !slices.Equal(c.Entrypoint, want) {
		t.Errorf("Entrypoint %q; want %q", c.Entrypoint, want)
	}
	wantPorts := map[string]struct{}{}
	for _, p := range []int{11215, 11216, 7531, 5658, 9715, 7000} {
		wantPorts[strconv.Itoa(p)+"/tcp"] = struct{}{}
	}
	if !reflect.DeepEqual(c.ExposedPorts, wantPorts) {
		t.Errorf("ExposedPorts %v; want %v", c.ExposedPorts, wantPorts)
	}
	if !reflect.DeepEqual(c.Volumes, map[string]struct{}{"/data": {}}) || c.WorkingDir != "/data" {
		t.Errorf("Volumes %v, WorkingDir %q; want /data", c.Volumes, c.WorkingDir)
	}
	if flagValue(c.Cmd, "--data-dir") != "/data" || flagValue(c.Cmd, "--metrics-addr") != "0.0.0.0:9715" ||
		flagValue(c.Cmd, "--bind") != "0.0.0.0" || flagValue(c.Cmd, "--semaphore-port") != "11216" ||
		!strings.Contains(flagValue(c.Cmd, "--allow"), "10.0.0.0/8") || !strings.Contains(flagValue(c.Cmd, "--allow"), "127.0.0.0/8") {
		t.Errorf("Cmd %q; want --bind 0.0.0.0 --allow with loopback and the private networks (protected mode would refuse a container's clients) --data-dir /data --metrics-addr 0.0.0.0:9715 --semaphore-port 11216", c.Cmd)
	}
	if h := c.Healthcheck; h == nil || !slices.Equal(h.Test, []string{"CMD", "/usr/local/bin/tallyctl", "health"}) || h.Interval <= 0 || h.Timeout <= 0 {
		t.Errorf("Healthcheck %+v; want CMD /usr/local/bin/tallyctl health with an interval and a timeout", h)
	}
	if !slices.Contains(c.Env, "TALLYD_METRICS_ADDR=127.0.0.1:9715") {
		t.Errorf("Env %q; want TALLYD_METRICS_ADDR=127.0.0.1:9715 (the metrics port, for tallyctl health)", c.Env)
	}
	if c.Labels["org.opencontainers.image.title"] != "tallyd" {
		t.Errorf("Labels %v; want org.opencontainers.image.title=tallyd", c.Labels)
	}
	// The ports the image exposes are tallyd's defaults, as its --help says.
	_, help := runBin(t, "--help")
	for flag, port := range map[string]int{"counter-port": 11215, "pool-port": 7531, "slock-port": 5658} {
		if !strings.Contains(help, fmt.Sprintf("--%s int", flag)) || !strings.Contains(help, fmt.Sprintf("(default %d)", port)) {
			t.Errorf("tallyd --help does not give --%s a default of %d (the image exposes it)", flag, port)
		}
	}
	for name, want := range map[string]ociimage.File{
		"/usr/local/bin/tallyd":   {Mode: 0o755},
		"/usr/local/bin/tallyctl": {Mode: 0o755},
		"/data":                   {Mode: fs.ModeDir | 0o700, UID: imageUID, GID: imageUID},
		"/tmp":                    {Mode: fs.ModeDir | fs.ModeSticky | 0o777},
		"/etc/passwd":             {Mode: 0o644},
	} {
		got, ok := img.Files[name]
		if !ok || got.Mode != want.Mode || got.UID != want.UID || got.GID != want.GID {
			t.Errorf("image file %s: %v (mode %v, owner %d:%d); want mode %v, owner %d:%d", name, ok, got.Mode, got.UID, got.GID, want.Mode, want.UID, want.GID)
		}
	}
	if !bytes.Contains(img.Files["/etc/passwd"].Data, []byte(fmt.Sprintf(":%d:%d:", imageUID, imageUID))) {
		t.Errorf("/etc/passwd names no user %d:\n%s", imageUID, img.Files["/etc/passwd"].Data)
	}

	// Independent readers: skopeo's view of the configuration, umoci's unpacked rootfs.
	skopeo, err1 := exec.LookPath("skopeo")
	umoci, err2 := exec.LookPath("umoci")
	if err1 != nil || err2 != nil {
		t.Skip("skopeo or umoci is not installed: run scripts/ensure-image-tools.sh (as root it installs the Debian packages)")
	}
	out, err := exec.Command(skopeo, "inspect", "--config", "oci-archive:"+archive).Output()
	if err != nil {
		t.Fatalf("skopeo inspect: %v", err)
	}
	var sc struct{ Config ociimage.Config }
	if err := json.Unmarshal(out, &sc); err != nil {
		t.Fatalf("skopeo inspect: %v\n%s", err, out)
	}
	sc.Config.Healthcheck = c.Healthcheck // the OCI configuration skopeo reads has no health check
	if !reflect.DeepEqual(sc.Config, c) {
		t.Errorf("skopeo sees the configuration\n%+v\nour reader\n%+v", sc.Config, c)
	}
	root := filepath.Join(dir, "unpack")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(skopeo, "copy", "-q", "oci-archive:"+archive, "oci:"+root+"/layout:tallyd").CombinedOutput(); err != nil {
		t.Fatalf("skopeo copy: %v\n%s", err, out)
	}
	unpack := []string{"unpack", "--image", root + "/layout:tallyd", root + "/bundle"}
	if os.Geteuid() != 0 {
		unpack = slices.Insert(unpack, 1, "--rootless")
	}
	if out, err := exec.Command(umoci, unpack...).CombinedOutput(); err != nil {
		t.Fatalf("umoci unpack: %v\n%s", err, out)
	}
	var spec struct {
		Process struct {
			User struct{ UID, GID int }
			Args []string
			Cwd  string
		}
	}
	b, err := os.ReadFile(root + "/bundle/config.json")
	if err == nil {
		err = json.Unmarshal(b, &spec)
	}
	if err != nil {
		t.Fatalf("umoci's runtime config: %v", err)
	}
	if p := spec.Process; p.User.UID != imageUID || p.User.GID != imageUID || p.Cwd != "/data" || !slices.Equal(p.Args, append(c.Entrypoint, c.Cmd...)) {
		t.Errorf("umoci's runtime process %+v; want uid %d, cwd /data, args %q", p, imageUID, append(c.Entrypoint, c.Cmd...))
	}
	rootfs := root + "/bundle/rootfs"
	tallyd := rootfs + "/usr/local/bin/tallyd"
	if b, err := os.ReadFile(tallyd); err != nil || !bytes.Equal(b, img.Files["/usr/local/bin/tallyd"].Data) {
		t.Fatalf("umoci's rootfs has another tallyd than the image's layer (%v)", err)
	}
	for _, bin := range []string{tallyd, rootfs + "/usr/local/bin/tallyctl"} {
		e, err := elf.Open(bin)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range e.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("%s is dynamically linked (PT_INTERP): the image has no loader", bin)
			}
		}
		e.Close()
	}

	// Run the rootfs's tallyd with the image's arguments, on this test's ports, as the
	// image's user when we are root (the bundle is made traversable for that user).
	data := rootfs + "/data"
	for _, d := range []string{filepath.Dir(dir), dir, root, root + "/bundle"} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	slock, metrics := freePort(t), freePort(t)
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", metrics)
	args := append(slices.Clone(c.Cmd), "--data-dir", data, "--bind", "127.0.0.1",
		"--counter-port", strconv.Itoa(freePort(t)), "--semaphore-port", strconv.Itoa(freePort(t)),
		"--pool-port", strconv.Itoa(freePort(t)), "--slock-port", strconv.Itoa(slock), "--metrics-addr", metricsAddr)
	asUser := func(cmd *exec.Cmd) *exec.Cmd {
		cmd.Dir = data
		cmd.Env = append(os.Environ(), c.Env...)
		if os.Geteuid() == 0 {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: imageUID, Gid: imageUID}}
		}
		return cmd
	}
	p := startCmd(t, asUser(exec.Command(tallyd, args...)))
	rc := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", slock), DialTimeout: time.Second, MaxRetries: -1})
	defer rc.Close()
	ctx := context.Background()
	var pong string
	if !waitUntil(time.Now().Add(20*time.Second), 50*time.Millisecond, func() bool {
		pong, err = rc.Ping(ctx).Result()
		return err == nil
	}) {
		t.Fatalf("PING on the slock port: %v; log:\n%s", err, p.log.String())
	}
	if pong != "PONG" {
		t.Errorf("PING = %q; want PONG", pong)
	}
	if err := rc.Set(ctx, "image", "ok", 0).Err(); err != nil {
		t.Errorf("SET: %v; log:\n%s", err, p.log.String())
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid)); err == nil && os.Geteuid() == 0 &&
		!strings.Contains(string(b), fmt.Sprintf("\nUid:\t%d\t", imageUID)) {
		t.Errorf("tallyd does not run as uid %d:\n%s", imageUID, b)
	}
	resp, err := http.Get("http://" + metricsAddr + "/healthz")
	if err != nil {
		t.Fatalf("GET /healthz: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /healthz: %s", resp.Status)
	}
	// The health check's command, once tallyctl has it (`tallyctl health`, asking /readyz).
	tallyctl := rootfs + "/usr/local/bin/tallyctl"
	if usage, _ := exec.Command(tallyctl, "--help").CombinedOutput(); strings.Contains(string(usage), "\n  health") {
		for _, env := range []string{"", "TALLYD_METRICS_ADDR=" + metricsAddr} {
			cmd := asUser(exec.Command(tallyctl, c.Healthcheck.Test[2:]...))
			if env == "" {
				cmd.Args = append(cmd.Args, "--metrics-addr", metricsAddr)
			} else {
				cmd.Env = append(cmd.Env, env)
			}
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("%s (%s): %v\n%s", strings.Join(cmd.Args, " "), env, err, out)
			}
		}
	} else {
		t.Log("this tallyctl has no health command yet: the health check's command is not run")
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.exitCode(t); code != 0 {
		t.Errorf("tallyd exited %d on SIGTERM; log:\n%s", code, p.log.String())
	}
	ents, err := os.ReadDir(data)
	if err != nil || len(ents) == 0 {
		t.Errorf("the image's data dir holds nothing after a SET (%v)", err)
	}
}

// flagValue is the value after the last `name` (or in `name=value`) in args.
func flagValue(args []string, name string) string {
	v := ""
	for i, a := range args {
		if a == name && i+1 < len(args) {
			v = args[i+1]
		} else if s, ok := strings.CutPrefix(a, name+"="); ok {
			v = s
		}
	}
	return v
}
