package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tallyctlEnv runs the real tallyctl with env added to the test's environment.
func tallyctlEnv(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	tallyctl(t, "version") // built once
	cmd := exec.Command(ctlPath, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	code, ok := exitStatus(err)
	if !ok {
		t.Fatalf("tallyctl %q: %v", args, err)
	}
	return code, string(out)
}

// TestTallyctlSecuredCluster: tallyctl logs in to a cluster whose members take an ACL file
// (issue 31, item 2): the default user may read INFO only, the admin everything. Before,
// tallyctl had no way to log in: snapshot save, cluster status and get were refused, so a
// secured cluster could not be backed up.
func TestTallyctlSecuredCluster(t *testing.T) {
	acl := filepath.Join(t.TempDir(), "users.acl")
	if err := os.WriteFile(acl, []byte("user default on nopass -@all +info +ping +hello +consistency\n"+
		"user admin on >adm1n ~* +@all\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := newCluster(t, 3, "--aclfile", acl)
	c.bound(120 * time.Second)
	lead := c.waitLeader(20*time.Second, nil)
	f := c.others(lead)[0]
	at := ctlAt(c.net.clientAddr(f))
	file := filepath.Join(c.dir, "secured.snap")

	if code, out := tallyctlEnv(t, nil, append(at, "snapshot", "save", file)...); code != 2 || !strings.Contains(out, "NOPERM") {
		t.Fatalf("snapshot save without a login: exit %d: %s", code, out)
	}
	login := []string{"TALLYD_USER=admin", "TALLYD_PASSWORD=adm1n"}
	if code, out := tallyctlEnv(t, login, append(at, "set", "k", "v")...); code != 0 {
		t.Fatalf("set through a follower, logged in: exit %d: %s", code, out)
	}
	if code, out := tallyctlEnv(t, login, append(at, "get", "k")...); code != 0 || out != "v\n" {
		t.Fatalf("get through a follower, logged in: exit %d: %q", code, out)
	}
	if code, out := tallyctlEnv(t, login, append(at, "cluster", "status")...); code != 0 || !strings.Contains(out, "role") {
		t.Fatalf("cluster status, logged in: exit %d: %s", code, out)
	}
	if code, out := tallyctlEnv(t, login, append(at, "snapshot", "save", file)...); code != 0 || !strings.Contains(out, "cluster snapshot") {
		t.Fatalf("snapshot save on a follower, logged in: exit %d: %s", code, out)
	}
	code, out := tallyctlEnv(t, login, append(at, "top", "--once", "--interval", "100ms")...)
	if code != 0 || strings.Contains(out, "auth failed") || !strings.Contains(out, "\nslock ") || strings.Contains(out, "slock port is unreachable") {
		t.Fatalf("top, logged in: exit %d:\n%s", code, out)
	}
	code, out = tallyctlEnv(t, []string{"TALLYD_USER=admin", "TALLYD_PASSWORD=wrong"}, append(at, "top", "--once", "--interval", "100ms")...)
	if !strings.Contains(out, "auth failed") || !strings.Contains(out, "WRONGPASS") {
		t.Fatalf("top with a wrong password: exit %d:\n%s", code, out)
	}
	c.check()
}
