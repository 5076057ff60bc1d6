/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package controlplane

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// decodeStages splits kwok's --config document into stages by name.
func decodeStages(t *testing.T, data []byte) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var stage map[string]any
		if err := decoder.Decode(&stage); err != nil {
			if err.Error() == "EOF" {
				return out
			}
			t.Fatalf("decode stages: %v", err)
		}
		if stage == nil {
			continue
		}
		if stage["kind"] != "Stage" {
			t.Fatalf("document of kind %v, want Stage", stage["kind"])
		}
		name := stage["metadata"].(map[string]any)["name"].(string)
		if _, dup := out[name]; dup {
			t.Fatalf("stage %s appears twice", name)
		}
		out[name] = stage["spec"].(map[string]any)
	}
}

func TestKwokStagesWithoutDelaysAreTheFastStages(t *testing.T) {
	data, err := kwokStages(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := decodeStages(t, data)
	for _, name := range []string{"node-initialize", "node-heartbeat", "pod-ready", "pod-complete", "pod-delete", crashLoopStageName} {
		if _, ok := got[name]; !ok {
			t.Errorf("stage %s missing", name)
		}
	}
	if len(got) != 6 {
		t.Errorf("got %d stages, want the 5 fast ones and the crash loop", len(got))
	}
	if _, ok := got["pod-ready"]["delay"]; ok {
		t.Errorf("fast pod-ready has a delay: %v", got["pod-ready"]["delay"])
	}
}

func TestKwokStagesWithDelaysAreFixed(t *testing.T) {
	data, err := kwokStages(1500*time.Millisecond, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got := decodeStages(t, data)
	for name, want := range map[string]float64{"pod-create": 1500, "pod-ready": 5000} {
		delay, ok := got[name]["delay"].(map[string]any)
		if !ok {
			t.Fatalf("stage %s has no delay", name)
		}
		if delay["durationMilliseconds"] != want {
			t.Errorf("stage %s waits %v ms, want %v", name, delay["durationMilliseconds"], want)
		}
		for key := range delay {
			if strings.HasPrefix(key, "jitter") {
				t.Errorf("stage %s keeps random %s", name, key)
			}
		}
		if delay["durationFrom"] == nil {
			t.Errorf("stage %s lost its per-pod delay annotation", name)
		}
	}
	for _, name := range []string{"pod-init-container-running", "pod-init-container-completed"} {
		if delay, ok := got[name]["delay"]; ok {
			t.Errorf("stage %s waits %v; init containers should be instant", name, delay)
		}
	}
	for _, name := range []string{"node-initialize", "node-heartbeat", "pod-complete", "pod-delete"} {
		if _, ok := got[name]; !ok {
			t.Errorf("stage %s missing", name)
		}
	}
}

// The embedded stages are copies; this fails when they drift from the kwok
// version pinned in hack/tools/kwok/go.mod, e.g. after a version bump.
func TestEmbeddedStagesMatchKwokModule(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	toolDir := filepath.Join(root, "hack", "tools", "kwok")
	version, err := requiredVersion(filepath.Join(toolDir, "go.mod"), "sigs.k8s.io/kwok")
	if err != nil {
		t.Fatal(err)
	}
	// The module is in the module cache once `make test-assets` has built kwok;
	// otherwise this downloads it through the module proxy.
	cmd := exec.Command("go", "mod", "download", "-json", "sigs.k8s.io/kwok@"+version)
	cmd.Dir = toolDir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("locate sigs.k8s.io/kwok@%s: %v", version, err)
	}
	var module struct{ Dir string }
	if err := json.Unmarshal(out, &module); err != nil || module.Dir == "" {
		t.Fatalf("locate sigs.k8s.io/kwok@%s: %v in %s", version, err, out)
	}
	files, err := stageFiles()
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no embedded stages")
	}
	for _, file := range files {
		ours, err := stages.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		theirs, err := os.ReadFile(filepath.Join(module.Dir, "kustomize", "stage", strings.TrimPrefix(file, "stages/")))
		if err != nil {
			t.Errorf("%s: %v", file, err)
			continue
		}
		if !bytes.Equal(ours, theirs) {
			t.Errorf("%s differs from sigs.k8s.io/kwok@%s; copy it again", file, version)
		}
	}
}

func TestKwokPodDeleteStageSkipsPodsAlreadyGivenGracePeriodZero(t *testing.T) {
	for name, delays := range map[string][2]time.Duration{"fast": {0, 0}, "general": {time.Second, time.Second}} {
		t.Run(name, func(t *testing.T) {
			data, err := kwokStages(delays[0], delays[1])
			if err != nil {
				t.Fatal(err)
			}
			selector := decodeStages(t, data)["pod-delete"]["selector"].(map[string]any)
			var keys []string
			for _, e := range selector["matchExpressions"].([]any) {
				e := e.(map[string]any)
				keys = append(keys, fmt.Sprintf("%s %s %v", e["key"], e["operator"], e["values"]))
			}
			want := []string{
				".metadata.deletionTimestamp Exists <nil>",
				".metadata.deletionGracePeriodSeconds == 0 NotIn [true]",
			}
			if strings.Join(keys, "\n") != strings.Join(want, "\n") {
				t.Errorf("pod-delete selects\n%s\nwant\n%s", strings.Join(keys, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

// The crash-loop stage takes exactly the pods the pod-ready stage leaves,
// at the same point of their lives, and makes them Running but not Ready.
func TestCrashLoopStageSplitsPodReady(t *testing.T) {
	for name, delays := range map[string][2]time.Duration{"fast": {0, 0}, "general": {time.Second, 2 * time.Second}} {
		t.Run(name, func(t *testing.T) {
			data, err := kwokStages(delays[0], delays[1])
			if err != nil {
				t.Fatal(err)
			}
			got := decodeStages(t, data)
			ready, crash := got["pod-ready"], got[crashLoopStageName]
			if crash == nil {
				t.Fatalf("no %s stage", crashLoopStageName)
			}
			operatorOn := func(spec map[string]any) map[string]string {
				ops := map[string]string{}
				for _, e := range spec["selector"].(map[string]any)["matchExpressions"].([]any) {
					expr := e.(map[string]any)
					ops[expr["key"].(string)] = expr["operator"].(string)
				}
				return ops
			}
			key := annotationQuery(CrashLoopAnnotation)
			readyOps, crashOps := operatorOn(ready), operatorOn(crash)
			if readyOps[key] != "DoesNotExist" || crashOps[key] != "Exists" {
				t.Errorf("annotation selector: pod-ready %q, crash loop %q; want DoesNotExist and Exists", readyOps[key], crashOps[key])
			}
			delete(readyOps, key)
			delete(crashOps, key)
			if fmt.Sprint(readyOps) != fmt.Sprint(crashOps) {
				t.Errorf("the stages select different pods besides the annotation:\npod-ready  %v\ncrash loop %v", readyOps, crashOps)
			}
			if fmt.Sprint(ready["delay"]) != fmt.Sprint(crash["delay"]) {
				t.Errorf("delay: pod-ready %v, crash loop %v", ready["delay"], crash["delay"])
			}
			tmpl, _ := crash["next"].(map[string]any)["statusTemplate"].(string)
			for _, want := range []string{"type: Ready", `status: "False"`, "CrashLoopBackOff", "phase: Running"} {
				if !strings.Contains(tmpl, want) {
					t.Errorf("crash-loop status lacks %q", want)
				}
			}
		})
	}
}
