/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package controlplane

import (
	"bytes"
	"context"
	"embed"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

const (
	// FakeNodeAnnotation marks the nodes kwok plays the kubelet for.
	FakeNodeAnnotation = "kwok.x-k8s.io/node"

	// DefaultPodCIDR is where kwok takes pod IPs from: the loopback network, so
	// that a test can listen on a pod's IP and answer as that pod.
	DefaultPodCIDR = "127.1.0.1/16"

	// nodeIP is every fake node's InternalIP (and so every pod's hostIP).
	nodeIP = "127.0.0.2"
)

// stages holds copies of kwok's stage definitions from
// sigs.k8s.io/kwok@<version>/kustomize/stage (the version pinned in
// hack/tools/kwok/go.mod); TestEmbeddedStagesMatchKwokModule keeps them equal.
//
//go:embed stages
var stages embed.FS

// fastStages make nodes Ready and pods Running and Ready as soon as they are
// scheduled, and delete pods as soon as they are deleted.
var fastStages = []string{
	"stages/node/fast/node-initialize.yaml",
	"stages/node/heartbeat/node-heartbeat.yaml",
	"stages/pod/fast/pod-ready.yaml",
	"stages/pod/fast/pod-complete.yaml",
	"stages/pod/fast/pod-delete.yaml",
}

// podDeleteStage is the stage that plays the kubelet's part in a pod deletion.
const podDeleteStage = "stages/pod/fast/pod-delete.yaml"

// kwokStages returns the --config document for kwok. With no delay it is the
// fast stages, with the pod-delete stage guarded (see guardPodDelete).
// Otherwise the pod lifecycle takes kwok's "general" stages,
// which pass through Pending with an IP (ContainerCreating) before Running and
// Ready, with their random delays replaced by fixed ones so that a benchmark
// measures the operator rather than the dice: startDelay from scheduling to the
// pod's IP, readyDelay from there to Ready. A pod can still override either with
// the stages' own annotations, pod-create.stage.kwok.x-k8s.io/delay and
// pod-ready.stage.kwok.x-k8s.io/delay.
func kwokStages(startDelay, readyDelay time.Duration) ([]byte, error) {
	if startDelay == 0 && readyDelay == 0 {
		return concatStages(fastStages, func(file string, stage map[string]any) (map[string]any, error) {
			switch file {
			case podDeleteStage:
				guardPodDelete(stage)
			case "stages/pod/fast/pod-ready.yaml":
				return withCrashLoop(stage)
			}
			return nil, nil
		})
	}
	delays := map[string]time.Duration{
		"stages/pod/general/pod-create.yaml":                   startDelay,
		"stages/pod/general/pod-init-container-running.yaml":   0,
		"stages/pod/general/pod-init-container-completed.yaml": 0,
		"stages/pod/general/pod-ready.yaml":                    readyDelay,
	}
	files := []string{
		"stages/node/fast/node-initialize.yaml",
		"stages/node/heartbeat/node-heartbeat.yaml",
		"stages/pod/general/pod-create.yaml",
		"stages/pod/general/pod-init-container-running.yaml",
		"stages/pod/general/pod-init-container-completed.yaml",
		"stages/pod/general/pod-ready.yaml",
		"stages/pod/fast/pod-complete.yaml",
		podDeleteStage,
	}
	return concatStages(files, func(file string, stage map[string]any) (map[string]any, error) {
		if delay, ok := delays[file]; ok {
			setFixedDelay(stage, delay)
		}
		switch file {
		case podDeleteStage:
			guardPodDelete(stage)
		case "stages/pod/general/pod-ready.yaml":
			return withCrashLoop(stage)
		}
		return nil, nil
	})
}

// guardPodDelete keeps kwok's pod-delete stage from playing twice for one
// pod, which deletes the pod's replacement.
//
// The stage deletes a terminating pod by name with grace period 0, and
// without a UID precondition (a kubelet sets one). The API server carries out
// such a delete of a pod that is already terminating in two writes: it first
// shortens deletionGracePeriodSeconds to 0, an update that matches the stage
// again, and then removes the pod. kwok cancels a queued stage when it sees a
// pod go, but it queues the stage for the update on another goroutine, often
// after that cancellation, so it plays the stage a second time by name: mostly
// it finds nothing, but when the StatefulSet controller has already made the
// replacement of the same name, it force-deletes a live pod (in one run of the
// e2e suite, 255 second plays found nothing and 4 removed a live replacement).
// A terminating pod whose grace period is
// already 0 is either being removed by the API server or held by finalizers
// this stage does not remove, so leaving it out loses nothing.
func guardPodDelete(stage map[string]any) {
	addMatchExpression(stage, map[string]any{
		// kwok compares strings and booleans, not JSON numbers, hence the
		// comparison in the query.
		"key":      ".metadata.deletionGracePeriodSeconds == 0",
		"operator": "NotIn",
		"values":   []any{"true"},
	})
}

// concatStages joins the stage files into one multi-document YAML, letting edit
// change each one first and add a stage after it (nil for none).
func concatStages(files []string, edit func(file string, stage map[string]any) (map[string]any, error)) ([]byte, error) {
	var out bytes.Buffer
	for _, file := range files {
		data, err := stages.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("read kwok stage %s: %w", file, err)
		}
		if edit != nil {
			var stage map[string]any
			if err := yaml.Unmarshal(data, &stage); err != nil {
				return nil, fmt.Errorf("parse kwok stage %s: %w", file, err)
			}
			extra, err := edit(file, stage)
			if err != nil {
				return nil, fmt.Errorf("edit kwok stage %s: %w", file, err)
			}
			if data, err = yaml.Marshal(stage); err != nil {
				return nil, fmt.Errorf("write kwok stage %s: %w", file, err)
			}
			if extra != nil {
				more, err := yaml.Marshal(extra)
				if err != nil {
					return nil, fmt.Errorf("write the stage added after kwok stage %s: %w", file, err)
				}
				data = append(append(data, "---\n"...), more...)
			}
		}
		out.WriteString("---\n")
		out.Write(data)
	}
	return out.Bytes(), nil
}

// setFixedDelay makes a stage wait exactly delay, keeping the per-pod override
// annotation (durationFrom) but dropping the random jitter.
func setFixedDelay(stage map[string]any, delay time.Duration) {
	spec, _ := stage["spec"].(map[string]any)
	if spec == nil {
		return
	}
	if delay == 0 {
		delete(spec, "delay")
		return
	}
	d := map[string]any{"durationMilliseconds": delay.Milliseconds()}
	if old, ok := spec["delay"].(map[string]any); ok && old["durationFrom"] != nil {
		d["durationFrom"] = old["durationFrom"]
	}
	spec["delay"] = d
}

// kwokArgs are the flags that make kwok a plain process next to the others: its
// own kubeconfig, the stages above, only the nodes annotated as fake, and no
// kubelet server (it is off unless --server-address or --node-port is set), so it
// takes no port.
func kwokArgs(kubeconfig, config, podCIDR string) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--config=" + config,
		"--manage-nodes-with-annotation-selector=" + FakeNodeAnnotation + "=fake",
		"--cidr=" + podCIDR,
		"--node-ip=" + nodeIP,
	}
}

// nodeName is the name of the i-th fake node.
func nodeName(i int) string {
	return fmt.Sprintf("kwok-node-%d", i)
}

// createNodes creates the fake nodes, spreading them over zones so that
// zone-aware rollouts have something to spread over.
func createNodes(ctx context.Context, c client.Client, count int, zones []string) ([]string, error) {
	names := make([]string, 0, count)
	for i := range count {
		name := nodeName(i)
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name: name,
				Annotations: map[string]string{
					FakeNodeAnnotation: "fake",
				},
				Labels: map[string]string{
					corev1.LabelHostname:   name,
					corev1.LabelOSStable:   "linux",
					corev1.LabelArchStable: "amd64",
					"type":                 "kwok",
				},
			},
		}
		if len(zones) > 0 {
			node.Labels[corev1.LabelTopologyZone] = zones[i%len(zones)]
		}
		if err := c.Create(ctx, node); err != nil {
			return nil, fmt.Errorf("create node %s: %w", name, err)
		}
		names = append(names, name)
	}
	return names, nil
}

// nodesSchedulable reports whether every node is Ready and free of the
// not-ready taint, which proves kwok (the Ready condition) and the node
// lifecycle controller (the taint removal) are at work. The returned string says
// what is still missing.
func nodesSchedulable(ctx context.Context, c client.Client, names []string) (bool, string, error) {
	for _, name := range names {
		var node corev1.Node
		if err := c.Get(ctx, client.ObjectKey{Name: name}, &node); err != nil {
			return false, "", fmt.Errorf("get node %s: %w", name, err)
		}
		ready := false
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				ready = true
			}
		}
		if !ready {
			return false, fmt.Sprintf("node %s is not Ready (kwok)", name), nil
		}
		for _, taint := range node.Spec.Taints {
			if taint.Key == corev1.TaintNodeNotReady || taint.Key == corev1.TaintNodeUnreachable {
				return false, fmt.Sprintf("node %s still has taint %s (node lifecycle controller)", name, taint.Key), nil
			}
		}
	}
	return true, "", nil
}

// writeKwokConfig writes the stages for kwok's --config.
func writeKwokConfig(file string, startDelay, readyDelay time.Duration) error {
	data, err := kwokStages(startDelay, readyDelay)
	if err != nil {
		return err
	}
	if err := os.WriteFile(file, data, 0o644); err != nil {
		return fmt.Errorf("write kwok config: %w", err)
	}
	return nil
}

// stageFiles lists the embedded stage files, for the test that compares them
// with the kwok module.
func stageFiles() ([]string, error) {
	var files []string
	err := fs.WalkDir(stages, "stages", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".yaml") {
			files = append(files, p)
		}
		return err
	})
	return files, err
}
