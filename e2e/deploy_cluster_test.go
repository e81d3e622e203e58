package e2e

// deploy/tallyd.yaml's container args form a cluster (issue 24): three tallyd processes,
// each in a network namespace (the cluster harness's, with a peer and a client bridge) and
// UTS and mount namespaces of its own, with the host name of a StatefulSet pod (tallyd-0,
// -1, -2) and an /etc/hosts resolving the pods' names under the headless Service to their
// peer addresses, run the manifest's args as the image's user (65532), the cluster key
// readable only by that group as a Secret with an fsGroup is. Only the paths are
// overridden (a later flag wins): the data dir and the key file. The test's clients come
// from the client bridge, a private network the args' --allow admits.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.yaml.in/yaml/v3"
)

// statefulSetArgs reads the StatefulSet of deploy/tallyd.yaml: its name, headless Service,
// replicas and container args.
func statefulSetArgs(t *testing.T) (name, service string, replicas int, args []string) {
	t.Helper()
	f, err := os.Open("../deploy/tallyd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := yaml.NewDecoder(f)
	for {
		var o struct {
			Kind     string
			Metadata struct{ Name string }
			Spec     struct {
				ServiceName string `yaml:"serviceName"`
				Replicas    int
				Template    struct {
					Spec struct{ Containers []struct{ Args []string } }
				}
			}
		}
		if err := dec.Decode(&o); err != nil {
			t.Fatalf("no StatefulSet in deploy/tallyd.yaml: %v", err)
		}
		if o.Kind == "StatefulSet" && len(o.Spec.Template.Spec.Containers) == 1 {
			return o.Metadata.Name, o.Spec.ServiceName, o.Spec.Replicas, o.Spec.Template.Spec.Containers[0].Args
		}
	}
}

func TestDeployArgsFormCluster(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: each member runs in UTS and mount namespaces of its own (unshare)")
	}
	for _, tool := range []string{"unshare", "setpriv"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s (util-linux)", tool)
		}
	}
	name, service, replicas, args := statefulSetArgs(t)
	dir := t.TempDir()
	if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// The Secret's file as the kubelet leaves it with fsGroup 65532: root:65532, 0440.
	key := filepath.Join(dir, "cluster.key")
	if err := os.WriteFile(key, []byte(strings.Repeat("k", 48)+"\n"), 0o440); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(key, 0, imageUID); err != nil {
		t.Fatal(err)
	}
	if why := netnsUsable(); why != "" {
		t.Skipf("no network namespaces: %s", why)
	}
	n := newNetnsNet(t, replicas)
	hosts := filepath.Join(dir, "hosts")
	var h strings.Builder
	for i := range replicas {
		fmt.Fprintf(&h, "%s %s-%d.%s\n", n.peerIP(i), name, i, service)
	}
	if err := os.WriteFile(hosts, []byte("127.0.0.1 localhost\n"+h.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	var procs []*proc
	for i := range replicas {
		data := filepath.Join(dir, fmt.Sprintf("data%d", i))
		if err := os.Mkdir(data, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(data, imageUID, imageUID); err != nil {
			t.Fatal(err)
		}
		pod := append(slices.Clone(args), "--data-dir="+data, "--cluster-key-file="+key)
		script := `hostname "$1" && mount --bind "$2" /etc/hosts && shift 2 && exec setpriv --reuid=65532 --regid=65532 --clear-groups "$@"`
		procs = append(procs, startCmd(t, n.command(i, "unshare", append([]string{"--uts", "--mount", "--propagation", "private",
			"sh", "-c", script, "sh", fmt.Sprintf("%s-%d", name, i), hosts, binPath}, pod...))))
	}
	// A write through each member is acknowledged once the three have formed a cluster.
	ctx := context.Background()
	for i, p := range procs {
		rc := redis.NewClient(&redis.Options{Addr: net.JoinHostPort(n.clientIP(i), "5658"), DialTimeout: time.Second, MaxRetries: -1})
		defer rc.Close()
		var err error
		if !waitUntil(time.Now().Add(60*time.Second), 100*time.Millisecond, func() bool {
			if done, _ := p.exited(); done {
				err = errors.New("it exited")
				return true
			}
			err = rc.Set(ctx, fmt.Sprintf("k%d", i), "v", 0).Err()
			return err == nil
		}) || err != nil {
			t.Fatalf("SET through %s-%d: %v; its log:\n%s", name, i, err, p.log.String())
		}
		// Node IDs came from the host names: pod ordinal plus one.
		p.waitLog(t, fmt.Sprintf(`"node_id":%d`, i+1))
		if done, err := p.exited(); done {
			t.Fatalf("%s-%d exited: %v\n%s", name, i, err, p.log.String())
		}
	}
	// Readiness as the probe asks it, once the server has /readyz (a 404 before it has).
	for i := range procs {
		url := "http://" + net.JoinHostPort(n.clientIP(i), "9715") + "/readyz"
		var code int
		waitUntil(time.Now().Add(20*time.Second), 100*time.Millisecond, func() bool {
			resp, err := http.Get(url)
			if err != nil {
				return false
			}
			resp.Body.Close()
			code = resp.StatusCode
			return code == http.StatusOK || code == http.StatusNotFound
		})
		if code != http.StatusOK && code != http.StatusNotFound {
			t.Errorf("GET %s: %d; want 200 (ready)", url, code)
		}
	}
	for i, p := range procs {
		// ip netns exec, unshare, sh and setpriv each exec the next: the process is tallyd.
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid)); err == nil &&
			!strings.Contains(string(b), fmt.Sprintf("\nUid:\t%d\t", imageUID)) {
			t.Errorf("%s-%d does not run as uid %d", name, i, imageUID)
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	for i, p := range procs {
		if code := p.exitCode(t); code != 0 {
			t.Errorf("%s-%d exited %d on SIGTERM; log:\n%s", name, i, code, p.log.String())
		}
	}
}
