/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

// Package image tests the operator image that `make image` builds (hack/image)
// and the Dockerfile that builds the same for Docker users: the image's config
// and files read back from the OCI layout, the binary in it run, two builds
// compared, and the version checked against the Helm chart's.
package image

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

const (
	repoRoot = "../.."
	// Fixed inputs of the test builds; the version is left to its default (the
	// chart's appVersion) because that default is what the test checks.
	revision = "0123456789abcdef0123456789abcdef01234567"
	epoch    = 1700000000

	ociIndex    = "application/vnd.oci.image.index.v1+json"
	ociManifest = "application/vnd.oci.image.manifest.v1+json"
	ociConfig   = "application/vnd.oci.image.config.v1+json"
	ociLayerGz  = "application/vnd.oci.image.layer.v1.tar+gzip"
)

var wantPlatforms = []string{"linux/amd64", "linux/arm64"}

// build is one run of the image builder.
type build struct {
	layout  layout
	archive string
	stdout  string
}

// buildImage runs the image builder on the source tree at source the way `make
// image` does, with fixed revision and time.
func buildImage(t *testing.T, builder, source, name string) build {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	archive := dir + ".oci.tar"
	cmd := exec.Command(builder, "--source="+source, "--layout="+dir, "--archive="+archive,
		"--revision="+revision, fmt.Sprintf("--source-date-epoch=%d", epoch))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("image build %s: %v\n%s", name, err, stderr.String())
	}
	t.Logf("image build %s took %s", name, time.Since(start).Round(time.Second))
	return build{layout: layout{t: t, dir: dir}, archive: archive, stdout: strings.TrimSpace(stdout.String())}
}

func compileBuilder(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "image-builder")
	cmd := exec.Command("go", "build", "-o", out, ".")
	cmd.Dir = filepath.Join(repoRoot, "hack", "image")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build hack/image: %v\n%s", err, b)
	}
	return out
}

func TestImage(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-compiles the operator for two architectures; skipped with -short")
	}
	builder := compileBuilder(t)
	// The builds read a copy of the sources, taken once: the checkout may change
	// while the test runs, and the second build reads a copy of the copy at
	// another path, so that a path leaking into the image would show.
	source := copySources(t, repoRoot, filepath.Join(t.TempDir(), "src-first"))
	first := buildImage(t, builder, source, "first")
	l := first.layout
	chart := readChart(t)

	top := l.top()
	var idx index
	l.json(top, &idx)
	images := map[string]image{}
	for _, d := range idx.Manifests {
		if d.Platform == nil {
			t.Fatalf("index entry %s has no platform", d.Digest)
		}
		images[d.Platform.OS+"/"+d.Platform.Architecture] = readImage(t, l, d)
	}

	t.Run("index", func(t *testing.T) {
		if top.MediaType != ociIndex || idx.MediaType != ociIndex || idx.SchemaVersion != 2 {
			t.Errorf("index media types %q, %q (schema %d), want an OCI image index", top.MediaType, idx.MediaType, idx.SchemaVersion)
		}
		got := slices.Sorted(maps.Keys(images))
		if !slices.Equal(got, wantPlatforms) || len(idx.Manifests) != len(wantPlatforms) {
			t.Errorf("platforms %v, want %v", got, wantPlatforms)
		}
		if first.stdout != fmt.Sprintf("%s:%s@%s", chart.repository, chart.appVersion, top.Digest) {
			t.Errorf("builder printed %q, want <repository>:<version>@<index digest> = %s:%s@%s", first.stdout, chart.repository, chart.appVersion, top.Digest)
		}
	})

	t.Run("config", func(t *testing.T) {
		for platform, img := range images {
			c := img.config
			if got := c.OS + "/" + c.Architecture; got != platform {
				t.Errorf("%s: config says %s", platform, got)
			}
			if c.Config.User != "65532:65532" {
				t.Errorf("%s: user %q, want 65532:65532 (non-root, as the chart runs it)", platform, c.Config.User)
			}
			if !slices.Equal(c.Config.Entrypoint, []string{"/echelon"}) || len(c.Config.Cmd) > 0 {
				t.Errorf("%s: entrypoint %q cmd %q, want [/echelon] and no cmd", platform, c.Config.Entrypoint, c.Config.Cmd)
			}
			if want := time.Unix(epoch, 0).UTC().Format(time.RFC3339); c.Created != want {
				t.Errorf("%s: created %q, want the source date epoch %s", platform, c.Created, want)
			}
			wantLabels := map[string]string{
				"org.opencontainers.image.source":   "https://github.com/echelon-operator/echelon",
				"org.opencontainers.image.version":  chart.appVersion,
				"org.opencontainers.image.revision": revision,
				"org.opencontainers.image.licenses": "Apache-2.0",
				"org.opencontainers.image.created":  c.Created,
			}
			for k, v := range wantLabels {
				if c.Config.Labels[k] != v {
					t.Errorf("%s: label %s = %q, want %q", platform, k, c.Config.Labels[k], v)
				}
			}
			if !reflect.DeepEqual(img.manifest.Annotations, c.Config.Labels) {
				t.Errorf("%s: manifest annotations %v differ from the config labels %v", platform, img.manifest.Annotations, c.Config.Labels)
			}
			if img.manifest.MediaType != ociManifest || img.manifest.Config.MediaType != ociConfig {
				t.Errorf("%s: media types %q, %q, want OCI manifest and config", platform, img.manifest.MediaType, img.manifest.Config.MediaType)
			}
		}
	})

	t.Run("files", func(t *testing.T) {
		for platform, img := range images {
			names := slices.Sorted(maps.Keys(img.files))
			if !slices.Equal(names, []string{"echelon", "tmp/"}) {
				t.Errorf("%s: image holds %v, want only echelon and tmp/ (an empty base)", platform, names)
			}
			for name, f := range img.files {
				if f.hdr.Uid != 0 || f.hdr.Gid != 0 || !f.hdr.ModTime.Equal(time.Unix(epoch, 0)) {
					t.Errorf("%s: %s owned by %d:%d, time %s; want root-owned at the source date epoch", platform, name, f.hdr.Uid, f.hdr.Gid, f.hdr.ModTime)
				}
			}
			if mode := img.files["echelon"].hdr.Mode; mode != 0o755 {
				t.Errorf("%s: /echelon mode %o, want 755 (not writable by the user it runs as)", platform, mode)
			}
			if mode := img.files["tmp/"].hdr.Mode; mode != 0o1777 {
				t.Errorf("%s: /tmp mode %o, want 1777", platform, mode)
			}
			assertStaticELF(t, platform, img.files["echelon"].data)
		}
	})

	t.Run("binary runs", func(t *testing.T) {
		platform := "linux/" + runtime.GOARCH
		img, ok := images[platform]
		if runtime.GOOS != "linux" || !ok {
			t.Fatalf("this test runs the image's binary and needs a host among %v, not %s/%s", wantPlatforms, runtime.GOOS, runtime.GOARCH)
		}
		bin := filepath.Join(t.TempDir(), "echelon")
		if err := os.WriteFile(bin, img.files["echelon"].data, 0o755); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(bin, "--help").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "-leader-elect") || !strings.Contains(string(out), "-version") {
			t.Errorf("echelon --help from the %s image: %v\n%s", platform, err, out)
		}
		out, err = exec.Command(bin, "--version").Output()
		want := fmt.Sprintf("echelon %s (revision %s,", chart.appVersion, revision)
		if err != nil || !strings.HasPrefix(string(out), want) {
			t.Errorf("echelon --version from the %s image = %q, %v; want it to start with %q", platform, out, err, want)
		}
	})

	t.Run("version agrees with the chart", func(t *testing.T) {
		// The chart deploys <image.repository>:<image.tag or appVersion>; the
		// image must be that name, and the binary say that version (above).
		if chart.tag != "" {
			t.Errorf("values.yaml image.tag = %q: leave it empty so the chart deploys its appVersion %s", chart.tag, chart.appVersion)
		}
		wantName := chart.repository + ":" + chart.appVersion
		if got := top.Annotations["io.containerd.image.name"]; got != wantName {
			t.Errorf("image name %q, the chart deploys %q", got, wantName)
		}
		if got := top.Annotations["org.opencontainers.image.ref.name"]; got != chart.appVersion {
			t.Errorf("image tag (ref.name) %q, want the chart's appVersion %q", got, chart.appVersion)
		}
		if got := idx.Annotations["org.opencontainers.image.version"]; got != chart.appVersion {
			t.Errorf("index version annotation %q, want %q", got, chart.appVersion)
		}
	})

	t.Run("archive holds the layout", func(t *testing.T) {
		assertArchiveMatchesLayout(t, first.archive, l.dir)
	})

	t.Run("Dockerfile builds the same", func(t *testing.T) {
		assertDockerfileAgrees(t, images["linux/amd64"].config, images["linux/amd64"].files["echelon"].data)
	})

	// Last, as it needs a second build: warm, it is quick, because the Go
	// build cache holds the binaries (-trimpath builds share cache entries
	// across directories); what it checks is that nothing in the assembly
	// (times, modes, order, compression, paths) varies between runs.
	t.Run("two builds give one digest", func(t *testing.T) {
		second := buildImage(t, builder, copySources(t, source, filepath.Join(t.TempDir(), "src-second")), "second")
		if a, b := l.top().Digest, second.layout.top().Digest; a != b {
			t.Errorf("two builds of the same source: index digests %s and %s", a, b)
		}
		if a, b := fileSHA256(t, first.archive), fileSHA256(t, second.archive); a != b {
			t.Errorf("two builds of the same source: archives sha256 %s and %s", a, b)
		}
	})
}

type image struct {
	manifest manifest
	config   imageConfig
	files    map[string]layerFile
}

func readImage(t *testing.T, l layout, d descriptor) image {
	t.Helper()
	var img image
	l.json(d, &img.manifest)
	l.json(img.manifest.Config, &img.config)
	if len(img.manifest.Layers) != 1 || len(img.config.RootFS.DiffIDs) != 1 {
		t.Fatalf("%s: %d layers and %d diff IDs, want one layer (the binary on an empty base)", d.Digest, len(img.manifest.Layers), len(img.config.RootFS.DiffIDs))
	}
	if mt := img.manifest.Layers[0].MediaType; mt != ociLayerGz {
		t.Errorf("%s: layer media type %q, want %q", d.Digest, mt, ociLayerGz)
	}
	img.files = l.layerFiles(img.manifest.Layers[0], img.config.RootFS.DiffIDs[0])
	return img
}

// assertStaticELF checks that the binary is for the platform's machine and needs
// no dynamic loader or shared library: an empty base has none.
func assertStaticELF(t *testing.T, platform string, data []byte) {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		t.Errorf("%s: /echelon is not an ELF binary: %v", platform, err)
		return
	}
	defer f.Close()
	want := map[string]elf.Machine{"linux/amd64": elf.EM_X86_64, "linux/arm64": elf.EM_AARCH64}[platform]
	if f.Machine != want {
		t.Errorf("%s: /echelon is built for %s, want %s", platform, f.Machine, want)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("%s: /echelon has a %s program header: it is dynamically linked", platform, p.Type)
		}
	}
	// -s -w: no symbol table and no DWARF, a third of the size; panics still
	// print symbolised stacks from the Go runtime's own tables.
	for _, s := range []string{".symtab", ".debug_info"} {
		if f.Section(s) != nil {
			t.Errorf("%s: /echelon has a %s section: want it stripped (-ldflags=-s -w)", platform, s)
		}
	}
}

type chartFacts struct {
	appVersion, repository, tag string
}

func readChart(t *testing.T) chartFacts {
	t.Helper()
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	var values struct {
		Image struct {
			Repository string `json:"repository"`
			Tag        string `json:"tag"`
		} `json:"image"`
	}
	for file, into := range map[string]any{"Chart.yaml": &chart, "values.yaml": &values} {
		raw, err := os.ReadFile(filepath.Join(repoRoot, "charts", "echelon", file))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(raw, into); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	if chart.AppVersion == "" || values.Image.Repository == "" {
		t.Fatalf("chart appVersion %q, image.repository %q: want both set", chart.AppVersion, values.Image.Repository)
	}
	return chartFacts{appVersion: chart.AppVersion, repository: values.Image.Repository, tag: values.Image.Tag}
}

func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", sha256.Sum256(data))
}

// copySources copies the source tree at from to to, leaving out what is not
// source: bin/ (the test control plane's binaries), dist/ and .git/ at the top.
func copySources(t *testing.T, from, to string) string {
	t.Helper()
	err := filepath.WalkDir(from, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			if slices.Contains([]string{"bin", "dist", ".git"}, rel) {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), data, 0o644)
	})
	if err != nil {
		t.Fatalf("copy the sources: %v", err)
	}
	return to
}
