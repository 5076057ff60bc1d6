/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package controlplane

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTailFile(t *testing.T) {
	tests := []struct {
		name    string
		content string
		lines   int
		want    string
	}{
		{name: "last lines", content: "a\nb\nc\nd\n", lines: 2, want: "c\nd"},
		{name: "no trailing newline", content: "a\nb\nc", lines: 2, want: "b\nc"},
		{name: "fewer lines than asked", content: "a\nb\n", lines: 5, want: "a\nb"},
		{name: "empty", content: "", lines: 3, want: ""},
		{name: "beyond the read limit", content: strings.Repeat("x\n", tailReadLimit) + "last\n", lines: 1, want: "last"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "c.log")
			if err := os.WriteFile(path, []byte(tt.content), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := tailFile(path, tt.lines)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("tailFile(%q, %d) = %q, want %q", tt.content, tt.lines, got, tt.want)
			}
		})
	}
}

func TestLogTailsNamesEveryComponent(t *testing.T) {
	cp := &ControlPlane{dir: t.TempDir()}
	if err := os.Mkdir(cp.LogDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cp.logPath("kwok"), []byte("first-line\nlast-line\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got := cp.LogTails(1)
	for _, c := range componentLogs {
		if !strings.Contains(got, "==> "+c+" ") {
			t.Errorf("no section for %s in\n%s", c, got)
		}
	}
	if !strings.Contains(got, "\nlast-line\n") || strings.Contains(got, "first-line") {
		t.Errorf("want only the last kwok line in\n%s", got)
	}
}
