/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

// Package docs checks the Markdown documentation: every link to a file of the
// repository points at one that exists, and every #anchor at a heading of it.
// Runbook URLs of the chart's alerts and "see ..." pointers between the guides
// are only useful if they land.
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

const repoRoot = "../.."

var (
	mdLink    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	codeFence = regexp.MustCompile("(?s)```.*?```")
	codeSpan  = regexp.MustCompile("`[^`\n]*`")
	// GitHub's anchors: lower case, spaces to hyphens, most punctuation dropped.
	anchorDrop = regexp.MustCompile(`[^a-z0-9 _-]`)
)

func TestLinks(t *testing.T) {
	files := markdownFiles(t)
	if len(files) < 10 {
		t.Fatalf("found %d Markdown files; the walk is wrong", len(files))
	}
	anchors := map[string]map[string]bool{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := codeFence.ReplaceAllString(string(raw), "")
		for _, m := range mdLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(text, ""), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			resolved := f
			if path != "" {
				resolved = filepath.Join(filepath.Dir(f), filepath.FromSlash(path))
			}
			rel, _ := filepath.Rel(repoRoot, f)
			if _, err := os.Stat(resolved); err != nil {
				t.Errorf("%s: link %q: no such file", rel, target)
				continue
			}
			if anchor == "" || !strings.HasSuffix(resolved, ".md") {
				continue
			}
			if anchors[resolved] == nil {
				anchors[resolved] = headingAnchors(t, resolved)
			}
			if !anchors[resolved][anchor] {
				t.Errorf("%s: link %q: %s has no heading with anchor #%s", rel, target, path, anchor)
			}
		}
	}
}

func markdownFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, dir := range []string{".", "docs", "charts"} {
		err := filepath.WalkDir(filepath.Join(repoRoot, dir), func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && p != filepath.Join(repoRoot, dir) && (dir == "." || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir // the root's own files only; docs/ and charts/ whole
			}
			if !d.IsDir() && strings.HasSuffix(p, ".md") {
				files = append(files, p)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return files
}

// headingAnchors returns the anchors of a file's headings, numbered like
// GitHub's when a heading repeats.
func headingAnchors(t *testing.T, file string) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	seen := map[string]int{}
	for line := range strings.Lines(codeFence.ReplaceAllString(string(raw), "")) {
		h, ok := strings.CutPrefix(line, "#")
		if !ok {
			continue
		}
		h = strings.TrimSpace(strings.TrimLeft(h, "#"))
		a := strings.ReplaceAll(anchorDrop.ReplaceAllString(strings.ToLower(h), ""), " ", "-")
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}
