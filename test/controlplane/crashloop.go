/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package controlplane

import (
	"fmt"

	"sigs.k8s.io/yaml"
)

// CrashLoopAnnotation, set on a pod (through its StatefulSet's template), makes
// kwok play a container that never starts: the pod goes Running with Ready
// and ContainersReady False and its containers waiting in CrashLoopBackOff,
// and stays so until it is deleted. A template that sets it is the "bad
// release" of the recovery specs and of the soak; reverting the template
// gives pods without it, which kwok makes Ready as usual. The value is not
// read.
const CrashLoopAnnotation = "echelon.dev/kwok-crash-loop"

// crashLoopStageName is the name of the stage that plays a crash loop.
const crashLoopStageName = "pod-crash-loop"

// crashLoopStatus is the status kwok gives a crash-looping pod: Running and
// Initialized, with an IP, but not Ready, its containers restarting.
const crashLoopStatus = `{{ $now := Now }}

conditions:
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: Initialized
- lastTransitionTime: {{ $now | Quote }}
  status: "False"
  reason: ContainersNotReady
  type: Ready
- lastTransitionTime: {{ $now | Quote }}
  status: "False"
  reason: ContainersNotReady
  type: ContainersReady
containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: false
  restartCount: 5
  state:
    waiting:
      reason: CrashLoopBackOff
      message: back-off restarting failed container
{{ end }}
{{ $hostIPs := NodeIPsWith .spec.nodeName }}
{{ with $hostIPs }}
hostIP: {{ index . 0 | Quote }}
{{ end }}
{{ $podIPs := PodIPsWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) ( or .metadata.name "" ) ( or .metadata.namespace "" ) }}
{{ with $podIPs }}
podIP: {{ index . 0 | Quote }}
{{ end }}
phase: Running
startTime: {{ $now | Quote }}
`

// annotationQuery is the kwok selector key of a pod annotation.
func annotationQuery(key string) string {
	return fmt.Sprintf(`.metadata.annotations["%s"]`, key)
}

// withCrashLoop makes the pod-ready stage leave crash-looping pods alone and
// returns the stage that plays them instead: the same selector (so it plays
// at the same point of the pod's life, with the same delay) with the
// annotation required, and crashLoopStatus as its outcome.
func withCrashLoop(ready map[string]any) (map[string]any, error) {
	raw, err := yaml.Marshal(ready)
	if err != nil {
		return nil, err
	}
	var crash map[string]any
	if err := yaml.Unmarshal(raw, &crash); err != nil {
		return nil, err
	}
	addMatchExpression(ready, map[string]any{"key": annotationQuery(CrashLoopAnnotation), "operator": "DoesNotExist"})
	addMatchExpression(crash, map[string]any{"key": annotationQuery(CrashLoopAnnotation), "operator": "Exists"})
	crash["metadata"] = map[string]any{"name": crashLoopStageName}
	spec, _ := crash["spec"].(map[string]any)
	if spec == nil {
		return nil, fmt.Errorf("kwok stage pod-ready has no spec")
	}
	// Weights choose among stages that match the same pod; none other does.
	delete(spec, "weight")
	delete(spec, "weightFrom")
	spec["next"] = map[string]any{"statusTemplate": crashLoopStatus}
	return crash, nil
}

// addMatchExpression adds a selector expression to a stage.
func addMatchExpression(stage map[string]any, expr map[string]any) {
	spec, _ := stage["spec"].(map[string]any)
	selector, _ := spec["selector"].(map[string]any)
	if selector == nil {
		return
	}
	expressions, _ := selector["matchExpressions"].([]any)
	selector["matchExpressions"] = append(expressions, expr)
}
