/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package nodetier

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strings"
)

// The node tier's own images (the pause image and the workload's) are one
// static binary each on an empty base, written as an OCI image layout in a tar
// file that `ctr images import` reads: there is no registry to pull from.
// Uncompressed, with the standard library only: nothing here is shipped.

const (
	mediaTypeIndex    = "application/vnd.oci.image.index.v1+json"
	mediaTypeManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaTypeConfig   = "application/vnd.oci.image.config.v1+json"
	mediaTypeLayer    = "application/vnd.oci.image.layer.v1.tar"
)

// ociImage is one image of an archive: name (repository:tag) runs entrypoint
// from a layer holding binary as /<binaryName>.
type ociImage struct {
	name       string
	entrypoint []string
	binaryName string
	binary     []byte
}

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int               `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// writeOCIArchive writes images into one OCI archive at path.
func writeOCIArchive(path string, images []ociImage) error {
	blobs := map[string][]byte{}
	addBlob := func(mediaType string, data []byte) descriptor {
		sum := sha256.Sum256(data)
		digest := "sha256:" + hex.EncodeToString(sum[:])
		blobs[digest] = data
		return descriptor{MediaType: mediaType, Digest: digest, Size: len(data)}
	}
	index := struct {
		SchemaVersion int          `json:"schemaVersion"`
		MediaType     string       `json:"mediaType"`
		Manifests     []descriptor `json:"manifests"`
	}{SchemaVersion: 2, MediaType: mediaTypeIndex}
	for _, img := range images {
		layerData, err := binaryLayer(img.binaryName, img.binary)
		if err != nil {
			return err
		}
		layer := addBlob(mediaTypeLayer, layerData)
		config, err := json.Marshal(map[string]any{
			"architecture": runtime.GOARCH,
			"os":           "linux",
			"config":       map[string]any{"Entrypoint": img.entrypoint, "WorkingDir": "/"},
			"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{layer.Digest}},
		})
		if err != nil {
			return err
		}
		manifest, err := json.Marshal(map[string]any{
			"schemaVersion": 2,
			"mediaType":     mediaTypeManifest,
			"config":        addBlob(mediaTypeConfig, config),
			"layers":        []descriptor{layer},
		})
		if err != nil {
			return err
		}
		m := addBlob(mediaTypeManifest, manifest)
		m.Annotations = map[string]string{
			"io.containerd.image.name":          img.name,
			"org.opencontainers.image.ref.name": img.name[strings.LastIndex(img.name, ":")+1:],
		}
		index.Manifests = append(index.Manifests, m)
	}
	indexData, err := json.Marshal(index)
	if err != nil {
		return err
	}

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(name string, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(data))}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	if err := add("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return err
	}
	if err := add("index.json", indexData); err != nil {
		return err
	}
	for digest, data := range blobs {
		if err := add("blobs/sha256/"+strings.TrimPrefix(digest, "sha256:"), data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write image archive: %w", err)
	}
	return nil
}

// binaryLayer is a tar of /<name> (executable) and an empty, sticky /tmp.
func binaryLayer(name string, binary []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "tmp/", Mode: 0o1777}); err != nil {
		return nil, err
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o755, Size: int64(len(binary))}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(binary); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
