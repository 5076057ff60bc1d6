/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package image

import (
	"archive/tar"
	"bytes"
	"debug/buildinfo"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// dockerfile is the root Dockerfile split into instructions (continuation lines
// joined, comments dropped).
type dockerfile []instruction

type instruction struct {
	cmd, args string
}

func readDockerfile(t *testing.T) dockerfile {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var out dockerfile
	var cur strings.Builder
	for line := range strings.Lines(string(raw)) {
		line = strings.TrimRight(line, "\r\n")
		if trimmed := strings.TrimSpace(line); trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		if s, ok := strings.CutSuffix(line, `\`); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(line)
		cmd, args, _ := strings.Cut(strings.TrimSpace(cur.String()), " ")
		out = append(out, instruction{cmd: strings.ToUpper(cmd), args: strings.Join(strings.Fields(args), " ")})
		cur.Reset()
	}
	return out
}

// finalStage returns the instructions after the last FROM, and that FROM.
func (d dockerfile) finalStage() (from string, stage dockerfile) {
	for i := len(d) - 1; i >= 0; i-- {
		if d[i].cmd == "FROM" {
			return d[i].args, d[i+1:]
		}
	}
	return "", nil
}

func (d dockerfile) all(cmd string) []string {
	var out []string
	for _, in := range d {
		if in.cmd == cmd {
			out = append(out, in.args)
		}
	}
	return out
}

var dockerLabel = regexp.MustCompile(`([a-z.]+)="([^"]*)"`)

// assertDockerfileAgrees checks that the Dockerfile produces what hack/image
// produces: the same base, file, user, entrypoint, labels and build settings.
// Docker cannot run here, so the file is compared with the built image.
func assertDockerfileAgrees(t *testing.T, cfg imageConfig, binary []byte) {
	t.Helper()
	d := readDockerfile(t)
	from, final := d.finalStage()
	if from != "scratch" {
		t.Errorf("Dockerfile's final stage is FROM %q, want scratch (an empty base, like hack/image)", from)
	}
	if got := final.all("USER"); !slices.Equal(got, []string{cfg.Config.User}) {
		t.Errorf("Dockerfile USER %v, the image runs as %q", got, cfg.Config.User)
	}
	if got := final.all("WORKDIR"); !slices.Equal(got, []string{cfg.Config.WorkingDir}) {
		t.Errorf("Dockerfile WORKDIR %v, the image has %q", got, cfg.Config.WorkingDir)
	}
	entrypoints := final.all("ENTRYPOINT")
	var entrypoint []string
	if len(entrypoints) != 1 || json.Unmarshal([]byte(entrypoints[0]), &entrypoint) != nil || !slices.Equal(entrypoint, cfg.Config.Entrypoint) {
		t.Errorf("Dockerfile ENTRYPOINT %v, want the exec form of %q", entrypoints, cfg.Config.Entrypoint)
	}
	copies := strings.Join(final.all("COPY"), "\n")
	for _, want := range []string{"--chmod=0755 /out/echelon /echelon", "/out/tmp /tmp"} {
		if !strings.Contains(copies, want) {
			t.Errorf("Dockerfile final stage COPY %q missing (hack/image puts /echelon mode 755 and /tmp in the image)", want)
		}
	}

	// Labels: the same keys and, apart from build inputs, the same values.
	got := map[string]string{}
	for _, l := range final.all("LABEL") {
		for _, m := range dockerLabel.FindAllStringSubmatch(l, -1) {
			got[m[1]] = m[2]
		}
	}
	for k, v := range cfg.Config.Labels {
		switch k {
		case "org.opencontainers.image.created": // BuildKit sets it from SOURCE_DATE_EPOCH
			continue
		case "org.opencontainers.image.version":
			v = "${VERSION}"
		case "org.opencontainers.image.revision":
			v = "${REVISION}"
		}
		if got[k] != v {
			t.Errorf("Dockerfile LABEL %s=%q, hack/image sets %q", k, got[k], v)
		}
		delete(got, k)
	}
	if len(got) > 0 {
		t.Errorf("Dockerfile sets labels hack/image does not: %v", got)
	}

	// The go build: the settings the image's binary records, and the link flags
	// (which Go does not record with -trimpath) as hack/image passes them.
	run := strings.Join(d.all("RUN"), "\n")
	for _, want := range []string{"CGO_ENABLED=0", "GOAMD64=v1", "GOARM64=v8.0", "-trimpath", "-buildvcs=false",
		`-ldflags="-s -w -buildid= -X main.version=${VERSION} -X main.revision=${REVISION}"`} {
		if !strings.Contains(run, want) {
			t.Errorf("Dockerfile's go build lacks %s", want)
		}
	}
	info, err := buildinfo.Read(bytes.NewReader(binary))
	if err != nil {
		t.Fatalf("build info of the image's binary: %v", err)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	for k, want := range map[string]string{"-trimpath": "true", "CGO_ENABLED": "0", "GOAMD64": "v1"} {
		if settings[k] != want {
			t.Errorf("the image's binary was built with %s=%q, want %q (as the Dockerfile does)", k, settings[k], want)
		}
	}
	for k := range settings {
		if strings.HasPrefix(k, "vcs.") {
			t.Errorf("the image's binary records %s: want -buildvcs=false, so that a dirty tree or a missing .git does not change the digest", k)
		}
	}
}

// assertArchiveMatchesLayout checks that the archive holds exactly the layout's
// files, byte for byte.
func assertArchiveMatchesLayout(t *testing.T, archive, dir string) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	inArchive := map[string][]byte{}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("archive: %v", err)
		}
		if hdr.Typeflag == tar.TypeReg {
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			inArchive[hdr.Name] = data
		}
	}
	inLayout := map[string][]byte{}
	err = filepath.WalkDir(dir, func(path string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		inLayout[filepath.ToSlash(rel)] = data
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(inArchive) != len(inLayout) {
		t.Errorf("archive holds %d files, the layout %d", len(inArchive), len(inLayout))
	}
	for name, data := range inLayout {
		if !bytes.Equal(inArchive[name], data) {
			t.Errorf("archive's %s differs from the layout's", name)
		}
	}
	if _, ok := inArchive["index.json"]; !ok {
		t.Error("archive has no index.json at its root: tools reading OCI archives would not find the image")
	}
}
