package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/tallyd/tallyd/internal/testcert"
)

// TestSecuredServer: tallyctl logs in to a server run as docs/security.md says (issue 31,
// item 2). Before, get, snapshot save, cluster status and top failed with NOAUTH (top
// showed it as "unreachable") whatever one did, so a secured server could not be backed
// up. Now --password (with redis-cli's warning), TALLYD_PASSWORD and --user log in; a
// refusal for want of a login says so, once ("tallyctl snapshot save", not "snapshot
// snapshot save"); top shows "auth failed", and the semaphore port tallyd leaves off by
// default as off, not as a red unreachable row.
func TestSecuredServer(t *testing.T) {
	s := startServer(t, false, "--requirepass", "s3cret")
	dir := t.TempDir()
	file := filepath.Join(dir, "b.snap")
	expect(t, s.ctl(t, "get", "k"), 2, nil, []string{"tallyctl get k: NOAUTH Authentication required.", "TALLYD_PASSWORD"})
	r := s.ctl(t, "snapshot", "save", file)
	expect(t, r, 2, nil, []string{"tallyctl snapshot save: NOAUTH"})
	if strings.Contains(r.err, "snapshot snapshot") {
		t.Errorf("doubled prefix: %s", r.err)
	}
	r = s.ctl(t, "cluster", "status")
	expect(t, r, 2, nil, []string{"tallyctl cluster status: NOAUTH"})
	if strings.Contains(r.err, "cluster cluster") {
		t.Errorf("doubled prefix: %s", r.err)
	}
	r = s.ctl(t, "top", "--once", "--interval", "100ms")
	expect(t, r, 0, []string{"auth failed on the slock port"}, nil)
	checkRow(t, r.out, `^slock \d+ auth failed: slock at 127\.0\.0\.1:\d+: INFO: NOAUTH`)
	checkRow(t, r.out, `^semaphore \d+ off \(nothing listens here`)
	if strings.Contains(r.out, "unreachable") {
		t.Errorf("top shows a row unreachable:\n%s", r.out)
	}

	// A wrong password: WRONGPASS, and top says auth failed.
	bad := []string{"TALLYD_PASSWORD=nope"}
	expect(t, s.run(t, bad, "get", "k"), 2, nil, []string{"AUTH: WRONGPASS invalid username-password pair"})
	r = s.run(t, bad, "top", "--once", "--interval", "100ms")
	checkRow(t, r.out, `^slock \d+ auth failed: .*WRONGPASS`)

	// --password on the command line: it works, with redis-cli's warning.
	r = s.ctl(t, "--password", "s3cret", "set", "k", "v")
	expect(t, r, 0, []string{"OK"}, []string{"Warning: Using a password with '--password' option on the command line interface may not be safe."})
	// From the environment: no warning; every command logs in.
	env := []string{"TALLYD_PASSWORD=s3cret"}
	r = s.run(t, env, "get", "k")
	expect(t, r, 0, []string{"v\n"}, nil)
	if r.err != "" {
		t.Errorf("stderr with the password from the environment: %q", r.err)
	}
	expect(t, s.run(t, env, "snapshot", "save", file), 0, []string{"saved " + file}, nil)
	expect(t, s.run(t, env, "snapshot", "status", file), 0, []string{"checksum ok"}, nil)
	expect(t, s.run(t, env, "cluster", "status"), 0, []string{"is a single node"}, nil)
	expect(t, s.run(t, env, "slock", "lock", "job", "--expried", "30", "--lock-id", "w"), 0, []string{"OK key=job"}, nil) // the old spelling
	expect(t, s.run(t, env, "slock", "token", "job"), 0, nil, nil)
	r = s.run(t, env, "top", "--once", "--interval", "100ms")
	expect(t, r, 0, []string{"LOCKS  1 keys locked"}, nil)
	if strings.Contains(r.out, "auth failed") || strings.Contains(r.out, "unreachable") {
		t.Errorf("top logged in:\n%s", r.out)
	}
}

// TestSecuredACLAndTLS: an ACL user (--user, TALLYD_USER) over TLS (--tls, --cacert, and
// --cert/--key for a server that wants client certificates).
func TestSecuredACLAndTLS(t *testing.T) {
	dir := t.TempDir()
	ca := testcert.NewCA(t, "tallyctl test CA")
	srv := ca.WriteFiles(t, dir, "server", "tallyd", "127.0.0.1")
	cli := ca.WriteFiles(t, dir, "client", "tallyctl")
	acl := filepath.Join(dir, "users.acl")
	if err := os.WriteFile(acl, []byte("user default off\nuser admin on >adm1n ~* +@all\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tlsPort := freePort(t)
	s := startServer(t, false, "--aclfile", acl, "--slock-tls-port", strconv.Itoa(tlsPort),
		"--tls-cert-file", srv.Cert, "--tls-key-file", srv.Key, "--tls-ca-cert-file", srv.CA)
	login := []string{"TALLYD_USER=admin", "TALLYD_PASSWORD=adm1n"}
	expect(t, s.run(t, login, "set", "k", "v"), 0, nil, nil)
	expect(t, s.run(t, nil, "--user", "admin", "get", "k"), 2, nil, []string{"WRONGPASS"})
	file := filepath.Join(dir, "b.snap")
	overTLS := []string{"--tls", "--cacert", srv.CA, "--cert", cli.Cert, "--key", cli.Key, "--slock-port", strconv.Itoa(tlsPort)}
	expect(t, s.run(t, login, append(overTLS, "get", "k")...), 0, []string{"v\n"}, nil)
	expect(t, s.run(t, login, append(overTLS, "snapshot", "save", file)...), 0, []string{"saved " + file}, nil)
	expect(t, s.run(t, login, append(overTLS, "cluster", "status")...), 0, []string{"single node"}, nil)
	// Without the client certificate the server refuses the handshake; without the CA the
	// server's certificate is not trusted.
	expect(t, s.run(t, login, "--tls", "--cacert", srv.CA, "--slock-port", strconv.Itoa(tlsPort), "get", "k"), 1, nil, nil)
	expect(t, s.run(t, login, "--tls", "--slock-port", strconv.Itoa(tlsPort), "get", "k"), 1, nil, []string{"TLS handshake"})
}

// TestTopNothingAnswers: top --once exits non-zero when no port answers.
func TestTopNothingAnswers(t *testing.T) {
	dead := strconv.Itoa(freePort(t))
	p := (*server)(nil).startEnv(t, nil, "--counter-port", dead, "--semaphore-port", dead, "--pool-port", dead,
		"--slock-port", dead, "top", "--once", "--interval", "100ms")
	r := p.wait(t)
	expect(t, r, 1, []string{"unreachable"}, []string{"no port of tallyd at 127.0.0.1 answered"})
}

// run runs tallyctl against s with env (TALLYD_* variables) and waits for it.
func (s *server) run(t *testing.T, env []string, args ...string) result {
	t.Helper()
	return s.startEnv(t, env, args...).wait(t)
}

// checkRow fails unless a line of screen, its spaces squeezed, matches re.
func checkRow(t *testing.T, screen, re string) {
	t.Helper()
	for _, l := range strings.Split(screen, "\n") {
		if matchRow(re, strings.Join(strings.Fields(l), " ")) {
			return
		}
	}
	t.Errorf("no line matches %q in\n%s", re, screen)
}

func matchRow(re, row string) bool { return regexp.MustCompile(re).MatchString(row) }
