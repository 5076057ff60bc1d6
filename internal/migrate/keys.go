/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package migrate

import "strings"

// The Grafana rollout-operator's labels and annotations, as its README and
// the Mimir and Loki deployments spell them.
const (
	labelRolloutGroup         = "rollout-group"
	annotationMaxUnavailable  = "rollout-max-unavailable"
	annotationLeader          = "grafana.com/rollout-downscale-leader"
	keyMinTimeBetweenZones    = "grafana.com/min-time-between-zones-downscale" // a label; an annotation is read too
	annotationUpscaleReady    = "grafana.com/rollout-upscale-only-when-leader-ready"
	annotationMirrorAPI       = "grafana.com/rollout-mirror-replicas-from-resource-api-version"
	annotationMirrorKind      = "grafana.com/rollout-mirror-replicas-from-resource-kind"
	annotationMirrorName      = "grafana.com/rollout-mirror-replicas-from-resource-name"
	annotationMirrorWriteBack = "grafana.com/rollout-mirror-replicas-from-resource-write-back"
	annotationForceReplicas   = "grafana.com/rollout-force-replicas"
	annotationDelayedDelay    = "grafana.com/rollout-delayed-downscale"
	annotationDelayedURL      = "grafana.com/rollout-prepare-delayed-downscale-url"
	labelNoDownscale          = "grafana.com/no-downscale"
	labelPrepareDownscale     = "grafana.com/prepare-downscale"
	annotationPreparePath     = "grafana.com/prepare-downscale-http-path"
	annotationPreparePort     = "grafana.com/prepare-downscale-http-port"
	annotationLastDownscale   = "grafana.com/last-downscale"
	labelInjectCA             = "grafana.com/inject-rollout-operator-ca"
)

// isGrafanaKey says whether a label or annotation key looks like the Grafana
// operator's, so that one migrate does not know is reported instead of
// silently left behind.
func isGrafanaKey(key string) bool {
	return strings.HasPrefix(key, "grafana.com/") || strings.HasPrefix(key, "rollout-")
}

// knownWorkloadKeys are the keys migrate translates (or, for last-downscale,
// knows to drop) on a workload.
var knownWorkloadKeys = map[string]bool{
	labelRolloutGroup: true, annotationMaxUnavailable: true, annotationLeader: true,
	keyMinTimeBetweenZones: true, annotationUpscaleReady: true, annotationMirrorAPI: true,
	annotationMirrorKind: true, annotationMirrorName: true, annotationMirrorWriteBack: true,
	annotationForceReplicas: true, annotationDelayedDelay: true, annotationDelayedURL: true,
	labelNoDownscale: true, labelPrepareDownscale: true, annotationPreparePath: true,
	annotationPreparePort: true, annotationLastDownscale: true,
}

// RolloutGroupLabel is the Grafana operator's label that puts a StatefulSet
// in a rollout-group; the RolloutGroup migrate writes has its value as name.
const RolloutGroupLabel = labelRolloutGroup
