package ociimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"path"
	"runtime"
	"sort"
	"strings"
	"time"
)

// Media types of the OCI image specification.
const (
	typeIndex    = "application/vnd.oci.image.index.v1+json"
	typeManifest = "application/vnd.oci.image.manifest.v1+json"
	typeConfig   = "application/vnd.oci.image.config.v1+json"
	typeLayer    = "application/vnd.oci.image.layer.v1.tar+gzip"
)

// File is one entry of the image's single layer: a regular file, or a directory when Mode
// has fs.ModeDir. Name is absolute ("/usr/local/bin/tallyd").
type File struct {
	Name     string
	Mode     fs.FileMode
	UID, GID int
	Data     []byte
}

// Image is what an archive holds, as Read returns it.
type Image struct {
	Config       Config
	OS, Arch     string
	Created      time.Time
	Files        map[string]File // by absolute name
	ManifestType string
	RefName      string // the index's org.opencontainers.image.ref.name
}

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Platform    *platform         `json:"platform,omitempty"`
}

type platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

type manifest struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Config        descriptor   `json:"config"`
	Layers        []descriptor `json:"layers"`
}

type index struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Manifests     []descriptor `json:"manifests"`
}

type imageConfig struct {
	Created      time.Time `json:"created"`
	Architecture string    `json:"architecture"`
	OS           string    `json:"os"`
	Config       Config    `json:"config"`
	RootFS       struct {
		Type    string   `json:"type"`
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
	History []struct {
		Created   time.Time `json:"created"`
		CreatedBy string    `json:"created_by"`
	} `json:"history"`
}

// Write writes an OCI archive (a tar of an OCI image layout, what `skopeo copy
// oci-archive:` and `podman load` read) of a linux image for this machine's architecture,
// tagged ref, with cfg and one layer of files. The output depends only on its inputs:
// every time stamp is created.
func Write(w io.Writer, ref string, cfg Config, files []File, created time.Time) error {
	created = created.UTC()
	layerTar, err := layer(files, created)
	if err != nil {
		return err
	}
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	zw.ModTime = created
	if _, err := zw.Write(layerTar); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	var ic imageConfig
	ic.Created, ic.Architecture, ic.OS, ic.Config = created, runtime.GOARCH, "linux", cfg
	ic.RootFS.Type = "layers"
	ic.RootFS.DiffIDs = []string{digest(layerTar)}
	ic.History = append(ic.History, struct {
		Created   time.Time `json:"created"`
		CreatedBy string    `json:"created_by"`
	}{created, "make image (internal/ociimage)"})
	cfgJSON, err := json.Marshal(ic)
	if err != nil {
		return err
	}
	m := manifest{SchemaVersion: 2, MediaType: typeManifest,
		Config: descriptor{MediaType: typeConfig, Digest: digest(cfgJSON), Size: int64(len(cfgJSON))},
		Layers: []descriptor{{MediaType: typeLayer, Digest: digest(gz.Bytes()), Size: int64(gz.Len())}}}
	mJSON, err := json.Marshal(m)
	if err != nil {
		return err
	}
	idx := index{SchemaVersion: 2, MediaType: typeIndex, Manifests: []descriptor{{MediaType: typeManifest,
		Digest: digest(mJSON), Size: int64(len(mJSON)),
		Annotations: map[string]string{"org.opencontainers.image.ref.name": ref},
		Platform:    &platform{Architecture: runtime.GOARCH, OS: "linux"}}}}
	idxJSON, err := json.Marshal(idx)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	put := func(name string, b []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), ModTime: created, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := tw.Write(b)
		return err
	}
	for _, d := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o755, ModTime: created, Format: tar.FormatPAX}); err != nil {
			return err
		}
	}
	for _, b := range [][]byte{gz.Bytes(), cfgJSON, mJSON} {
		if err := put("blobs/sha256/"+strings.TrimPrefix(digest(b), "sha256:"), b); err != nil {
			return err
		}
	}
	if err := put("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return err
	}
	if err := put("index.json", idxJSON); err != nil {
		return err
	}
	return tw.Close()
}

// layer is the uncompressed tar of files, their missing parent directories added (root's,
// 0755), sorted by name.
func layer(files []File, created time.Time) ([]byte, error) {
	all := map[string]File{}
	for _, f := range files {
		if !path.IsAbs(f.Name) || path.Clean(f.Name) != f.Name || f.Name == "/" {
			return nil, fmt.Errorf("image file %q: not a clean absolute path", f.Name)
		}
		if _, dup := all[f.Name]; dup {
			return nil, fmt.Errorf("image file %q: listed twice", f.Name)
		}
		all[f.Name] = f
	}
	for _, f := range files {
		for d := path.Dir(f.Name); d != "/"; d = path.Dir(d) {
			if _, ok := all[d]; !ok {
				all[d] = File{Name: d, Mode: fs.ModeDir | 0o755}
			}
		}
	}
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range names {
		f := all[n]
		h := &tar.Header{Name: strings.TrimPrefix(n, "/"), Mode: int64(f.Mode.Perm()), Uid: f.UID, Gid: f.GID,
			ModTime: created, Format: tar.FormatPAX}
		if f.Mode&fs.ModeSticky != 0 {
			h.Mode |= 0o1000
		}
		if f.Mode.IsDir() {
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.Data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// Read reads an OCI archive with one image of one layer, checking every digest and size.
func Read(r io.Reader) (*Image, error) {
	blobs := map[string][]byte{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		blobs[h.Name] = b
	}
	blob := func(d descriptor, wantType string, v any) ([]byte, error) {
		b, ok := blobs["blobs/sha256/"+strings.TrimPrefix(d.Digest, "sha256:")]
		switch {
		case !ok:
			return nil, fmt.Errorf("blob %s is not in the archive", d.Digest)
		case digest(b) != d.Digest || int64(len(b)) != d.Size:
			return nil, fmt.Errorf("blob %s: %d bytes of digest %s; the descriptor says %d", d.Digest, len(b), digest(b), d.Size)
		case d.MediaType != wantType:
			return nil, fmt.Errorf("blob %s has media type %s; want %s", d.Digest, d.MediaType, wantType)
		}
		if v != nil {
			return b, json.Unmarshal(b, v)
		}
		return b, nil
	}
	if string(blobs["oci-layout"]) == "" {
		return nil, fmt.Errorf("no oci-layout file: not an OCI archive")
	}
	var idx index
	if err := json.Unmarshal(blobs["index.json"], &idx); err != nil {
		return nil, fmt.Errorf("index.json: %v", err)
	}
	if len(idx.Manifests) != 1 {
		return nil, fmt.Errorf("index.json lists %d manifests; want 1", len(idx.Manifests))
	}
	var m manifest
	if _, err := blob(idx.Manifests[0], typeManifest, &m); err != nil {
		return nil, err
	}
	var ic imageConfig
	if _, err := blob(m.Config, typeConfig, &ic); err != nil {
		return nil, err
	}
	if len(m.Layers) != 1 || len(ic.RootFS.DiffIDs) != 1 {
		return nil, fmt.Errorf("%d layers, %d diff IDs; want 1", len(m.Layers), len(ic.RootFS.DiffIDs))
	}
	gz, err := blob(m.Layers[0], typeLayer, nil)
	if err != nil {
		return nil, err
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, err
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		return nil, err
	}
	if digest(raw) != ic.RootFS.DiffIDs[0] {
		return nil, fmt.Errorf("the layer's diff ID is %s; the config says %s", digest(raw), ic.RootFS.DiffIDs[0])
	}
	img := &Image{Config: ic.Config, OS: ic.OS, Arch: ic.Architecture, Created: ic.Created, Files: map[string]File{},
		ManifestType: m.MediaType, RefName: idx.Manifests[0].Annotations["org.opencontainers.image.ref.name"]}
	lr := tar.NewReader(bytes.NewReader(raw))
	for {
		h, err := lr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		f := File{Name: "/" + strings.TrimSuffix(h.Name, "/"), Mode: fs.FileMode(h.Mode).Perm(), UID: h.Uid, GID: h.Gid}
		if h.Mode&0o1000 != 0 {
			f.Mode |= fs.ModeSticky
		}
		switch h.Typeflag {
		case tar.TypeDir:
			f.Mode |= fs.ModeDir
		case tar.TypeReg:
			if f.Data, err = io.ReadAll(lr); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("layer entry %s: type %c is not a file or directory", h.Name, h.Typeflag)
		}
		img.Files[f.Name] = f
	}
	return img, nil
}
