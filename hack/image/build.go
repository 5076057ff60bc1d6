/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// build writes the image layout (and archive) and returns the digest of the
// image index, the digest users pull by.
func build(c buildConfig) (v1.Hash, error) {
	work, err := os.MkdirTemp("", "echelon-image-")
	if err != nil {
		return v1.Hash{}, err
	}
	defer os.RemoveAll(work)

	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range c.platforms {
		bin := filepath.Join(work, "echelon-"+p.OS+"-"+p.Architecture)
		if err := compile(c, p, bin); err != nil {
			return v1.Hash{}, err
		}
		img, err := platformImage(c, p, bin)
		if err != nil {
			return v1.Hash{}, fmt.Errorf("image for %s/%s: %w", p.OS, p.Architecture, err)
		}
		platform := p
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &platform, Annotations: c.labels()},
		})
	}
	idx = mutate.Annotations(idx, c.labels()).(v1.ImageIndex)
	digest, err := idx.Digest()
	if err != nil {
		return v1.Hash{}, err
	}

	if err := os.RemoveAll(c.layout); err != nil {
		return v1.Hash{}, err
	}
	path, err := layout.Write(c.layout, empty.Index)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("write layout %s: %w", c.layout, err)
	}
	// The tag (ref.name) is what skopeo, oras and crane select in a layout; the
	// full name is what `docker load` and containerd import the image as.
	if err := path.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": c.version,
		"io.containerd.image.name":          c.repository + ":" + c.version,
	})); err != nil {
		return v1.Hash{}, fmt.Errorf("write layout %s: %w", c.layout, err)
	}
	if c.archive != "" {
		if err := writeArchive(c.layout, c.archive, c.created); err != nil {
			return v1.Hash{}, fmt.Errorf("write archive %s: %w", c.archive, err)
		}
	}
	return digest, nil
}

// compile builds a static operator binary. Every setting that changes the
// output is fixed here rather than taken from the caller's environment.
func compile(c buildConfig, p v1.Platform, out string) error {
	ldflags := strings.Join([]string{
		"-s", "-w", "-buildid=",
		"-X", "main.version=" + c.version,
		"-X", "main.revision=" + c.revision,
	}, " ")
	cmd := exec.Command(c.goBin, "build", "-trimpath", "-buildvcs=false", "-mod=readonly", "-ldflags="+ldflags, "-o", out, ".")
	cmd.Dir = c.source
	cmd.Env = append(os.Environ(),
		"CGO_ENABLED=0",
		"GOOS="+p.OS,
		"GOARCH="+p.Architecture,
		"GOAMD64=v1",
		"GOARM64=v8.0",
		"GOFLAGS=",
		"GOEXPERIMENT=",
	)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build for %s/%s: %w", p.OS, p.Architecture, err)
	}
	return nil
}

// platformImage is the binary alone on an empty base, run as a non-root user.
func platformImage(c buildConfig, p v1.Platform, bin string) (v1.Image, error) {
	gz, err := binaryLayer(bin, c.created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(gz)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History: v1.History{
			Created:   v1.Time{Time: c.created},
			CreatedBy: "hack/image: echelon " + c.version + " for " + p.OS + "/" + p.Architecture,
		},
	})
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = p.OS, p.Architecture
	cfg.Created = v1.Time{Time: c.created}
	cfg.Config = v1.Config{
		User:       nonRootUser,
		Entrypoint: []string{"/" + binaryPath},
		WorkingDir: "/",
		Labels:     c.labels(),
	}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return nil, err
	}
	return mutate.Annotations(img, c.labels()).(v1.Image), nil
}

// binaryLayer is a gzipped tar holding /echelon (root-owned, not writable by
// the non-root user) and an empty, sticky /tmp, with every time set to created.
func binaryLayer(bin string, created time.Time) ([]byte, error) {
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(zw)
	entries := []struct {
		hdr  tar.Header
		data []byte
	}{
		{hdr: tar.Header{Typeflag: tar.TypeReg, Name: binaryPath, Mode: 0o755, Size: int64(len(data))}, data: data},
		{hdr: tar.Header{Typeflag: tar.TypeDir, Name: "tmp/", Mode: 0o1777}},
	}
	for _, e := range entries {
		hdr := e.hdr
		hdr.ModTime, hdr.Format = created, tar.FormatPAX
		if err := tw.WriteHeader(&hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeArchive tars the layout directory in a fixed order with fixed metadata,
// so the archive's checksum is as reproducible as the image's digest.
func writeArchive(dir, archive string, created time.Time) error {
	var files []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		files = append(files, path) // WalkDir visits in lexical order
		return nil
	})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(archive), 0o755); err != nil {
		return err
	}
	tmp := archive + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	tw := tar.NewWriter(f)
	for _, path := range files {
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		info, err := os.Stat(path)
		if err != nil {
			return err
		}
		hdr := &tar.Header{Name: filepath.ToSlash(rel), ModTime: created, Format: tar.FormatPAX}
		if info.IsDir() {
			hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, hdr.Name+"/", 0o755
		} else {
			hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeReg, 0o644, info.Size()
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !info.IsDir() {
			if err := copyFile(tw, path); err != nil {
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, archive)
}

func copyFile(w io.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}
