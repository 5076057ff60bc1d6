/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package image

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The OCI image layout, read with the standard library only, so that the test
// checks the files users get rather than what go-containerregistry (which wrote
// them) makes of them.

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations"`
	Platform    *struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
	} `json:"platform"`
}

type index struct {
	SchemaVersion int               `json:"schemaVersion"`
	MediaType     string            `json:"mediaType"`
	Manifests     []descriptor      `json:"manifests"`
	Annotations   map[string]string `json:"annotations"`
}

type manifest struct {
	SchemaVersion int               `json:"schemaVersion"`
	MediaType     string            `json:"mediaType"`
	Config        descriptor        `json:"config"`
	Layers        []descriptor      `json:"layers"`
	Annotations   map[string]string `json:"annotations"`
}

type imageConfig struct {
	OS           string `json:"os"`
	Architecture string `json:"architecture"`
	Created      string `json:"created"`
	Config       struct {
		User       string            `json:"User"`
		Entrypoint []string          `json:"Entrypoint"`
		Cmd        []string          `json:"Cmd"`
		Env        []string          `json:"Env"`
		WorkingDir string            `json:"WorkingDir"`
		Labels     map[string]string `json:"Labels"`
	} `json:"config"`
	RootFS struct {
		Type    string   `json:"type"`
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
}

type layout struct {
	t   *testing.T
	dir string
}

// blob reads a blob and checks that it is what its descriptor says: the
// digest names its content and the size is right.
func (l layout) blob(d descriptor) []byte {
	l.t.Helper()
	algo, hexDigest, ok := strings.Cut(d.Digest, ":")
	if !ok || algo != "sha256" {
		l.t.Fatalf("descriptor digest %q: want sha256:<hex>", d.Digest)
	}
	data, err := os.ReadFile(filepath.Join(l.dir, "blobs", algo, hexDigest))
	if err != nil {
		l.t.Fatalf("blob of %s: %v", d.MediaType, err)
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != hexDigest {
		l.t.Fatalf("blob %s holds content of digest sha256:%x", d.Digest, sum)
	}
	if int64(len(data)) != d.Size {
		l.t.Fatalf("blob %s has %d bytes, its descriptor says %d", d.Digest, len(data), d.Size)
	}
	return data
}

func (l layout) json(d descriptor, into any) {
	l.t.Helper()
	if err := json.Unmarshal(l.blob(d), into); err != nil {
		l.t.Fatalf("blob %s (%s): %v", d.Digest, d.MediaType, err)
	}
}

// top reads index.json and returns its only entry, the image index.
func (l layout) top() descriptor {
	l.t.Helper()
	raw, err := os.ReadFile(filepath.Join(l.dir, "index.json"))
	if err != nil {
		l.t.Fatal(err)
	}
	var idx index
	if err := json.Unmarshal(raw, &idx); err != nil {
		l.t.Fatalf("index.json: %v", err)
	}
	if len(idx.Manifests) != 1 {
		l.t.Fatalf("index.json lists %d entries, want 1 (the multi-arch index)", len(idx.Manifests))
	}
	marker, err := os.ReadFile(filepath.Join(l.dir, "oci-layout"))
	if err != nil || !strings.Contains(string(marker), `"imageLayoutVersion"`) {
		l.t.Fatalf("oci-layout marker: %q, %v", marker, err)
	}
	return idx.Manifests[0]
}

// layerFile is one entry of a layer.
type layerFile struct {
	hdr  *tar.Header
	data []byte
}

// layerFiles unpacks a gzipped layer and checks that its uncompressed digest is
// the diff ID the config records.
func (l layout) layerFiles(d descriptor, diffID string) map[string]layerFile {
	l.t.Helper()
	zr, err := gzip.NewReader(strings.NewReader(string(l.blob(d))))
	if err != nil {
		l.t.Fatalf("layer %s is not gzip: %v", d.Digest, err)
	}
	h := sha256.New()
	tr := tar.NewReader(io.TeeReader(zr, h))
	files := map[string]layerFile{}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			l.t.Fatalf("layer %s: %v", d.Digest, err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			l.t.Fatal(err)
		}
		files[hdr.Name] = layerFile{hdr: hdr, data: data}
	}
	if _, err := io.Copy(io.Discard, zr); err != nil { // the tar's end padding
		l.t.Fatal(err)
	}
	if got := fmt.Sprintf("sha256:%x", h.Sum(nil)); got != diffID {
		l.t.Errorf("layer %s uncompresses to %s, the config's diff ID is %s", d.Digest, got, diffID)
	}
	return files
}
