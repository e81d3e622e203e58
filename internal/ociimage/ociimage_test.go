package ociimage

import (
	"archive/tar"
	"bytes"
	"io"
	"io/fs"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseDockerfile(t *testing.T) {
	df := `ARG V=1
FROM golang:${V} AS build
RUN make
USER root
# the final stage
FROM scratch
COPY --from=build /rootfs/ /
USER 10:20
WORKDIR /data
EXPOSE 80 53/udp \
       443
VOLUME ["/data"]
ENV A=1 B="two"
LABEL a.b=c
STOPSIGNAL SIGINT
HEALTHCHECK --interval=5s --timeout=1s --start-period=7s --retries=4 CMD ["/bin/x", "health"]
ENTRYPOINT ["/bin/x"]
CMD ["--flag", "v"]
`
	got, err := ParseDockerfile(strings.NewReader(df))
	if err != nil {
		t.Fatal(err)
	}
	want := Config{User: "10:20", WorkingDir: "/data", StopSignal: "SIGINT",
		ExposedPorts: map[string]struct{}{"80/tcp": {}, "53/udp": {}, "443/tcp": {}},
		Volumes:      map[string]struct{}{"/data": {}}, Env: []string{"A=1", "B=two"},
		Labels: map[string]string{"a.b": "c"}, Entrypoint: []string{"/bin/x"}, Cmd: []string{"--flag", "v"},
		Healthcheck: &Healthcheck{Test: []string{"CMD", "/bin/x", "health"}, Interval: 5 * time.Second,
			Timeout: time.Second, StartPeriod: 7 * time.Second, Retries: 4}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParseDockerfile =\n%+v\nwant\n%+v", got, want)
	}
	for _, tc := range []struct{ df, err string }{
		{"FROM scratch\nRUN true\n", "has a RUN"},
		{"FROM scratch\nCMD /bin/x\n", "line 2: CMD: not a JSON list"},
		{"FROM scratch\nVOLUME /data\n", "line 2: VOLUME: not a JSON list"},
		{"FROM scratch\nADD x /\n", "line 2: ADD: not supported"},
		{"FROM scratch\nHEALTHCHECK --every=1s CMD [\"x\"]\n", "unknown option --every"},
		{"FROM scratch\nHEALTHCHECK CMD x\n", "is not CMD"},
		{"FROM scratch\nENV A\n", `"A" is not KEY=VALUE`},
		{"FROM scratch\nCMD [\"x\", \\\n", "ends in a continuation"},
	} {
		if _, err := ParseDockerfile(strings.NewReader(tc.df)); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("ParseDockerfile(%q) = %v; want an error with %q", tc.df, err, tc.err)
		}
	}
}

// Write then Read gives back the configuration and the files, parents added; the same
// inputs give the same bytes; a changed blob is caught.
func TestWriteRead(t *testing.T) {
	cfg := Config{User: "1:1", Entrypoint: []string{"/bin/x"}, Healthcheck: &Healthcheck{Test: []string{"CMD", "/bin/x"}, Interval: time.Second}}
	files := []File{
		{Name: "/bin/x", Mode: 0o755, Data: []byte("binary")},
		{Name: "/data", Mode: fs.ModeDir | 0o700, UID: 1, GID: 1},
		{Name: "/tmp", Mode: fs.ModeDir | fs.ModeSticky | 0o777},
	}
	created := time.Unix(1700000000, 0).UTC()
	var a, b bytes.Buffer
	if err := Write(&a, "v1", cfg, files, created); err != nil {
		t.Fatal(err)
	}
	if err := Write(&b, "v1", cfg, files, created); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("two writes of the same image differ")
	}
	img, err := Read(bytes.NewReader(a.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(img.Config, cfg) || img.RefName != "v1" || img.OS != "linux" || !img.Created.Equal(created) {
		t.Errorf("Read: config %+v, ref %q, os %q, created %v", img.Config, img.RefName, img.OS, img.Created)
	}
	want := map[string]File{"/bin": {Name: "/bin", Mode: fs.ModeDir | 0o755}}
	for _, f := range files {
		want[f.Name] = f
	}
	if !reflect.DeepEqual(img.Files, want) {
		t.Errorf("Read: files %+v; want %+v", img.Files, want)
	}
	for _, bad := range []File{{Name: "bin/x"}, {Name: "/a/../b"}, {Name: "/"}} {
		if err := Write(io.Discard, "v1", cfg, []File{bad}, created); err == nil {
			t.Errorf("Write of file %q: no error", bad.Name)
		}
	}
	// Flip a byte of the layer blob: the digest check catches it.
	var c bytes.Buffer
	tr, tw := tar.NewReader(bytes.NewReader(a.Bytes())), tar.NewWriter(&c)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		body, _ := io.ReadAll(tr)
		if h.Size > 100 && strings.HasPrefix(h.Name, "blobs/") && body[0] == 0x1f {
			body[len(body)/2] ^= 1
		}
		_ = tw.WriteHeader(h)
		_, _ = tw.Write(body)
	}
	_ = tw.Close()
	if _, err := Read(&c); err == nil || !strings.Contains(err.Error(), "bytes of digest") {
		t.Errorf("Read of a changed layer: %v; want a digest error", err)
	}
}
