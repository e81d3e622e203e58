package main

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/spf13/pflag"

	"github.com/tallyd/tallyd/loop"
)

// securityOptions are the flags of who may connect and who may do what (docs/security.md).
type securityOptions struct {
	requirePass   string
	aclFile       string
	protectedMode string
	allow         string
	perListener   map[loop.Proto]*string // --counter-allow, ...
}

// allowFlags are the per-listener allow-list flags, by the listener they are for.
var allowFlags = []struct {
	proto loop.Proto
	flag  string
}{
	{loop.ProtoCounter, "counter-allow"}, {loop.ProtoSemaphore, "semaphore-allow"}, {loop.ProtoPool, "pool-allow"},
	{loop.ProtoSlock, "slock-allow"}, {loop.ProtoPeer, "peer-allow"},
}

// secretFlags are the flags whose values are never logged or shown.
var secretFlags = map[string]bool{"requirepass": true}

func (o *securityOptions) flags(fs *pflag.FlagSet) {
	fs.StringVar(&o.requirePass, "requirepass", "", "the password of the Redis-text side's default user (AUTH `PASSWORD`); empty: none. Visible to local users in the process list: prefer requirepass in a config file only root can read")
	fs.StringVar(&o.aclFile, "aclfile", "", "Redis ACL `FILE` of users for the Redis-text side (user NAME on >password ~pattern +@category -command ...; docs/security.md); ACL LOAD and SIGHUP read it again; not with --requirepass")
	fs.StringVar(&o.protectedMode, "protected-mode", "yes", "`yes|no`; yes: a listener bound to a non-loopback address with no allow-list (and, for Redis text, no password) accepts loopback clients only, as Redis's protected mode; no: off")
	fs.StringVar(&o.allow, "allow", "", "the networks (`CIDR,...`; an address is a /32 or /128) every listener accepts connections from; others are closed at accept. A listener's own --X-allow replaces it")
	o.perListener = map[loop.Proto]*string{}
	for _, a := range allowFlags {
		v := new(string)
		o.perListener[a.proto] = v
		what := a.proto.String() + " listener"
		if a.proto == loop.ProtoPeer {
			what = "cluster peer listener"
		}
		fs.StringVar(v, a.flag, "", "the networks (`CIDR,...`) the "+what+" accepts connections from (instead of --allow)")
	}
}

// config puts the settings into cfg, whose listeners are all made.
func (o *securityOptions) config(cfg *loop.Config) error {
	switch strings.ToLower(o.protectedMode) {
	case "yes", "true", "on", "1":
		cfg.ProtectedMode = true
	case "no", "false", "off", "0":
		cfg.ProtectedMode = false
	default:
		return fmt.Errorf("--protected-mode %q: yes or no", o.protectedMode)
	}
	if o.requirePass != "" && o.aclFile != "" {
		return errors.New("--requirepass and --aclfile together: give the default user's password in the ACL file (user default on >password ~* +@all)")
	}
	cfg.RequirePass, cfg.ACLFile = o.requirePass, o.aclFile
	all, err := loop.ParseAllow(o.allow)
	if err != nil {
		return fmt.Errorf("--allow %q: %w", o.allow, err)
	}
	own := map[loop.Proto][]netip.Prefix{}
	for _, a := range allowFlags { // every one is checked, its listener on or not
		if v := *o.perListener[a.proto]; v != "" {
			if own[a.proto], err = loop.ParseAllow(v); err != nil {
				return fmt.Errorf("--%s %q: %w", a.flag, v, err)
			}
		}
	}
	for i := range cfg.Listeners {
		l := &cfg.Listeners[i]
		l.Allow = all
		if list, ok := own[l.Proto]; ok {
			l.Allow = list
		}
	}
	return nil
}
