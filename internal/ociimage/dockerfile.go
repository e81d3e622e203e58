// Package ociimage writes and reads single-layer OCI image archives with the standard
// library only, so that `make image` builds tallyd's container image from the local binaries
// without a registry, a daemon or a base image. The image's settings come from the
// Dockerfile's final stage, so both ways of building give the same configuration.
package ociimage

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

// Config is the runtime part of an image's configuration (the "config" object of the OCI
// image configuration, with Docker's Healthcheck, which podman and docker honour).
type Config struct {
	User         string              `json:"User,omitempty"`
	ExposedPorts map[string]struct{} `json:"ExposedPorts,omitempty"`
	Env          []string            `json:"Env,omitempty"`
	Entrypoint   []string            `json:"Entrypoint,omitempty"`
	Cmd          []string            `json:"Cmd,omitempty"`
	Volumes      map[string]struct{} `json:"Volumes,omitempty"`
	WorkingDir   string              `json:"WorkingDir,omitempty"`
	Labels       map[string]string   `json:"Labels,omitempty"`
	StopSignal   string              `json:"StopSignal,omitempty"`
	Healthcheck  *Healthcheck        `json:"Healthcheck,omitempty"`
}

// Healthcheck is Docker's health check: Test is ["CMD", argv...]; durations in nanoseconds.
type Healthcheck struct {
	Test        []string      `json:"Test"`
	Interval    time.Duration `json:"Interval,omitempty"`
	Timeout     time.Duration `json:"Timeout,omitempty"`
	StartPeriod time.Duration `json:"StartPeriod,omitempty"`
	Retries     int           `json:"Retries,omitempty"`
}

// ParseDockerfile reads the settings of a Dockerfile's final stage: USER, WORKDIR, EXPOSE,
// VOLUME, ENV, LABEL, STOPSIGNAL, ENTRYPOINT, CMD and HEALTHCHECK. ENTRYPOINT, CMD, VOLUME and
// HEALTHCHECK must use the JSON form. COPY lines are the caller's business (the files it
// puts in the layer); RUN is refused in the final stage, which has no shell to run it.
func ParseDockerfile(r io.Reader) (Config, error) {
	var c Config
	runs := false
	lines, err := logicalLines(r)
	if err != nil {
		return c, err
	}
	for _, l := range lines {
		word, rest, _ := strings.Cut(l.text, " ")
		rest = strings.TrimSpace(rest)
		bad := func(format string, a ...any) error {
			return fmt.Errorf("Dockerfile line %d: %s: %s", l.num, word, fmt.Sprintf(format, a...))
		}
		word = strings.ToUpper(word)
		switch word {
		case "FROM":
			c, runs = Config{}, false // a new stage: only the last one counts
		case "ARG", "COPY":
		case "RUN":
			runs = true
		case "USER":
			c.User = rest
		case "WORKDIR":
			c.WorkingDir = rest
		case "STOPSIGNAL":
			c.StopSignal = rest
		case "EXPOSE":
			for _, p := range strings.Fields(rest) {
				if !strings.Contains(p, "/") {
					p += "/tcp"
				}
				if c.ExposedPorts == nil {
					c.ExposedPorts = map[string]struct{}{}
				}
				c.ExposedPorts[p] = struct{}{}
			}
		case "VOLUME":
			var vs []string
			if err := json.Unmarshal([]byte(rest), &vs); err != nil {
				return c, bad("not a JSON list: %v", err)
			}
			for _, v := range vs {
				if c.Volumes == nil {
					c.Volumes = map[string]struct{}{}
				}
				c.Volumes[v] = struct{}{}
			}
		case "ENV", "LABEL":
			kv, err := pairs(rest)
			if err != nil {
				return c, bad("%v", err)
			}
			for _, p := range kv {
				if word == "ENV" {
					c.Env = append(c.Env, p[0]+"="+p[1])
					continue
				}
				if c.Labels == nil {
					c.Labels = map[string]string{}
				}
				c.Labels[p[0]] = p[1]
			}
		case "ENTRYPOINT", "CMD":
			var argv []string
			if err := json.Unmarshal([]byte(rest), &argv); err != nil {
				return c, bad("not a JSON list (the exec form; the image has no shell): %v", err)
			}
			if word == "CMD" {
				c.Cmd = argv
			} else {
				c.Entrypoint = argv
			}
		case "HEALTHCHECK":
			h, err := healthcheck(rest)
			if err != nil {
				return c, bad("%v", err)
			}
			c.Healthcheck = h
		default:
			return c, bad("not supported here")
		}
	}
	if runs {
		return c, fmt.Errorf("Dockerfile: the final stage has a RUN, which an image without a shell cannot run")
	}
	return c, nil
}

type line struct {
	num  int
	text string
}

// logicalLines joins backslash-continued lines and drops comments and blank lines.
func logicalLines(r io.Reader) ([]line, error) {
	var out []line
	var cur strings.Builder
	start := 0
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		t := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(t, "#") || (t == "" && cur.Len() == 0) {
			continue
		}
		if cur.Len() == 0 {
			start = n
		}
		cont := strings.HasSuffix(t, `\`)
		cur.WriteString(strings.TrimSuffix(t, `\`))
		if cont {
			cur.WriteByte(' ')
			continue
		}
		out = append(out, line{start, strings.Join(strings.Fields(cur.String()), " ")})
		cur.Reset()
	}
	if cur.Len() > 0 {
		return nil, fmt.Errorf("Dockerfile line %d: ends in a continuation", start)
	}
	return out, sc.Err()
}

// pairs reads key=value words, values optionally in double quotes (without spaces inside).
func pairs(s string) ([][2]string, error) {
	var out [][2]string
	for _, w := range strings.Fields(s) {
		k, v, ok := strings.Cut(w, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%q is not KEY=VALUE", w)
		}
		out = append(out, [2]string{k, strings.Trim(v, `"`)})
	}
	return out, nil
}

// healthcheck reads `[--interval=D] [--timeout=D] [--start-period=D] [--retries=N] CMD [...]`.
func healthcheck(s string) (*Healthcheck, error) {
	h := &Healthcheck{}
	for strings.HasPrefix(s, "--") {
		opt, rest, _ := strings.Cut(s, " ")
		s = strings.TrimSpace(rest)
		name, val, _ := strings.Cut(strings.TrimPrefix(opt, "--"), "=")
		var err error
		switch name {
		case "interval":
			h.Interval, err = time.ParseDuration(val)
		case "timeout":
			h.Timeout, err = time.ParseDuration(val)
		case "start-period":
			h.StartPeriod, err = time.ParseDuration(val)
		case "retries":
			_, err = fmt.Sscanf(val, "%d", &h.Retries)
		default:
			err = fmt.Errorf("unknown option --%s", name)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %v", opt, err)
		}
	}
	argv, ok := strings.CutPrefix(s, "CMD ")
	var test []string
	if !ok || json.Unmarshal([]byte(argv), &test) != nil || len(test) == 0 {
		return nil, fmt.Errorf("%q is not CMD [\"argv\", ...]", s)
	}
	h.Test = append([]string{"CMD"}, test...)
	return h, nil
}
