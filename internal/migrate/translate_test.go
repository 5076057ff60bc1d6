/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package migrate

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files from the current output")

// TestGolden translates every testdata/*.yaml and compares the resources,
// the patches and the report with testdata/<name>.golden.
func TestGolden(t *testing.T) {
	inputs, err := filepath.Glob("testdata/*.yaml")
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no inputs: %v", err)
	}
	for _, input := range inputs {
		name := strings.TrimSuffix(filepath.Base(input), ".yaml")
		t.Run(name, func(t *testing.T) {
			got := render(t, input)
			golden := filepath.Join("testdata", name+".golden")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./internal/migrate/ -update to write it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("output differs from %s (rerun with -update and review the diff):\n%s", golden, got)
			}
		})
	}
}

func render(t *testing.T, input string) []byte {
	t.Helper()
	f, err := os.Open(input)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var in Input
	if err := in.Decode(f, "from-flag"); err != nil {
		t.Fatal(err)
	}
	res := Translate(in, Options{})
	var out bytes.Buffer
	out.WriteString("# resources\n")
	if err := res.WriteResources(&out); err != nil {
		t.Fatal(err)
	}
	out.WriteString("\n# patches\n")
	if err := res.WritePatches(&out); err != nil {
		t.Fatal(err)
	}
	out.WriteString("\n# report\n")
	if err := res.WriteReport(&out); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func TestDuplicateWorkloadIsReported(t *testing.T) {
	var in Input
	doc := "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: a, namespace: ns1, labels: {rollout-group: g}}\nspec: {updateStrategy: {type: OnDelete}}\n"
	if err := in.Decode(strings.NewReader(doc+"---\n"+strings.Replace(doc, "rollout-group: g", "rollout-group: h", 1)), ""); err != nil {
		t.Fatal(err)
	}
	res := Translate(in, Options{PausedGroups: true})
	if len(res.RolloutGroups) != 1 || res.RolloutGroups[0].Name != "g" || !res.RolloutGroups[0].Spec.Paused {
		t.Errorf("want one paused group g from the first copy, got %+v", res.RolloutGroups)
	}
	if !res.HasErrors() || res.Findings[0].Object != "StatefulSet ns1/a" {
		t.Errorf("want the duplicate reported, got %+v", res.Findings)
	}
}

func TestDecodeRejectsBrokenYAML(t *testing.T) {
	var in Input
	err := in.Decode(strings.NewReader("kind: StatefulSet\n---\nmetadata: [\n"), "")
	if err == nil || !strings.Contains(err.Error(), "document 2") {
		t.Errorf("want an error naming document 2, got %v", err)
	}
}
