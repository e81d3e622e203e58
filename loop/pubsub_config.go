package loop

import (
	"strconv"
	"strings"
	"time"

	"github.com/tallyd/tallyd/proto/resp"
)

// This file is pub/sub's settings: client-output-buffer-limit (the flag and CONFIG SET) and
// CONFIG SET of notify-keyspace-events (notify.go).

// obufClasses are client-output-buffer-limit's client classes, in the order CONFIG GET
// writes them; only pubsub is enforced here (a normal client's output is --max-output's).
var obufClasses = [3]string{"normal", "slave", "pubsub"}

// obufLimits renders client-output-buffer-limit as CONFIG GET answers it.
func (ps *pubsub) obufLimits() string {
	var b []byte
	for i, c := range obufClasses {
		l := ps.obuf[i]
		if i == 2 {
			l = ps.limit
		}
		if i > 0 {
			b = append(b, ' ')
		}
		b = append(append(b, c...), ' ')
		b = strconv.AppendInt(b, l.Hard, 10)
		b = strconv.AppendInt(append(b, ' '), l.Soft, 10)
		b = strconv.AppendInt(append(b, ' '), int64(l.SoftFor/time.Second), 10)
	}
	return string(b)
}

// obufErr is Redis 7.0's CONFIG SET error for a client-output-buffer-limit value.
func obufErr(why string) string {
	return "ERR CONFIG SET failed (possibly related to argument 'client-output-buffer-limit') - " + why
}

// parseObuf parses a client-output-buffer-limit value, "class hard soft seconds"...,
// into the limits it sets (by class index), or Redis 7.0's error.
func parseObuf(v string, into *[3]PubsubLimit, set *[3]bool) string {
	f := strings.Fields(v)
	if len(f)%4 != 0 {
		return obufErr("Wrong number of arguments in buffer limit configuration.")
	}
	for i := 0; i < len(f); i += 4 {
		c := -1
		switch strings.ToLower(f[i]) {
		case "normal":
			c = 0
		case "slave", "replica":
			c = 1
		case "pubsub":
			c = 2
		}
		if c < 0 {
			return obufErr("Invalid client class specified in buffer limit configuration.")
		}
		hard, ok1 := memBytes(f[i+1])
		soft, ok2 := memBytes(f[i+2])
		secs, err := strconv.ParseInt(f[i+3], 10, 64)
		if !ok1 || !ok2 || err != nil || secs < 0 || secs > int64(1<<62)/int64(time.Second) {
			return obufErr("Error in hard, soft or soft_seconds setting in buffer limit configuration.")
		}
		into[c], set[c] = PubsubLimit{Hard: hard, Soft: soft, SoftFor: time.Duration(secs) * time.Second}, true
	}
	return ""
}

// memBytes parses a Redis memory size: digits with an optional unit, k/m/g (powers of
// 1000) or kb/mb/gb (of 1024), in any case.
func memBytes(v string) (int64, bool) {
	mul := int64(1)
	l := strings.ToLower(v)
	for _, u := range []struct {
		s string
		m int64
	}{{"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30}, {"k", 1e3}, {"m", 1e6}, {"g", 1e9}, {"b", 1}} {
		if strings.HasSuffix(l, u.s) {
			mul, l = u.m, l[:len(l)-len(u.s)]
			break
		}
	}
	if l == "" || l[0] < '0' || l[0] > '9' {
		return 0, false
	}
	n, err := strconv.ParseInt(l, 10, 64)
	if err != nil || n > (1<<62)/mul {
		return 0, false
	}
	return n * mul, true
}

// ParsePubsubLimit parses the --client-output-buffer-limit flag: Redis's value for the
// pubsub class ("32mb 8mb 60"), or with class names ("pubsub 32mb 8mb 60").
func ParsePubsubLimit(v string) (PubsubLimit, error) {
	if f := strings.Fields(v); len(f) == 3 {
		v = "pubsub " + v
	}
	var l [3]PubsubLimit
	var set [3]bool
	l[2] = DefaultPubsubLimit
	if why := parseObuf(v, &l, &set); why != "" {
		return PubsubLimit{}, &configError{v, why[strings.LastIndex(why, " - ")+3:]}
	}
	return l[2], nil
}

// ValidNotify reports whether v is a notify-keyspace-events value (for the flag's check).
func ValidNotify(v string) bool {
	_, ok := parseNotify(v)
	return ok
}

// configError is a flag value refused, with Redis's reason.
type configError struct{ v, why string }

func (e *configError) Error() string { return strconv.Quote(e.v) + ": " + e.why }

// configSet answers CONFIG SET param value...: notify-keyspace-events and
// client-output-buffer-limit change at once; any other parameter is refused (tallyd's
// settings are its flags), and nothing is changed unless every pair is valid.
func (ps *pubsub) configSet(b []byte, args [][]byte) []byte {
	if len(args)%2 != 0 {
		return resp.AppendError(b, "ERR syntax error")
	}
	notify, obuf := ps.notify, [3]PubsubLimit{ps.obuf[0], ps.obuf[1], ps.limit}
	var seen [2]bool
	for i := 2; i < len(args); i += 2 {
		v := string(args[i+1])
		k := -1
		switch {
		case resp.Is(args[i], "notify-keyspace-events"):
			k = 0
			f, ok := parseNotify(v)
			if !ok {
				return resp.AppendError(b, notifyErr)
			}
			notify = f
		case resp.Is(args[i], "client-output-buffer-limit"):
			k = 1
			var set [3]bool
			if why := parseObuf(v, &obuf, &set); why != "" {
				return resp.AppendError(b, why)
			}
		default:
			return resp.AppendError(b, "ERR CONFIG SET is not supported for '"+clip(args[i])+
				"': restart tallyd with other flags (only notify-keyspace-events and client-output-buffer-limit change at run time)")
		}
		if seen[k] {
			return resp.AppendError(b, "ERR CONFIG SET failed (possibly related to argument '"+
				strings.ToLower(string(args[i]))+"') - duplicate parameter")
		}
		seen[k] = true
	}
	ps.notify, ps.obuf[0], ps.obuf[1], ps.limit = notify, obuf[0], obuf[1], obuf[2]
	ps.locks.KeepGone = notify&(nExpired|nLock) != 0
	return resp.AppendSimple(b, "OK")
}
