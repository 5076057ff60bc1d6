/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package migrate

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// scalingPolicy writes the ScalingPolicy of w when any of its keys asks for
// one: a source of replicas (a leader, a resource, forced replicas), the
// zone delay, or a downscale rule.
func (t *translation) scalingPolicy(w *workload) {
	sp := v1alpha1.ScalingPolicy{TypeMeta: typeMeta("ScalingPolicy")}
	sp.Spec.TargetRef = v1alpha1.PolicyTargetReference{Kind: w.kind, Name: w.name}
	var consumed []string
	ok := true
	if w.sts != nil {
		ok = t.replicasSource(w, &sp.Spec, &consumed)
		if d, set, valid := t.duration(w, keyMinTimeBetweenZones); set && valid {
			if d.Duration > 0 { // unset and 0s both mean no delay
				sp.Spec.MinTimeBetweenZoneDownscales = d
			}
			consumed = append(consumed, keyMinTimeBetweenZones)
			if _, grouped := w.labels[labelRolloutGroup]; !grouped {
				t.warn(w.ref(), keyMinTimeBetweenZones, "the StatefulSet has no %s: the zone delay has no other zones to wait for", labelRolloutGroup)
			}
		} else if set {
			ok = false
		}
		if force, set := w.get(annotationForceReplicas); set {
			n, err := strconv.ParseInt(strings.TrimSpace(force), 10, 32)
			if err != nil || n < 0 {
				t.fail(w.ref(), annotationForceReplicas, "%q is not a number of replicas (an integer >= 0)", force)
				ok = false
			} else {
				sp.Spec.ForceReplicas = new(int32(n))
				consumed = append(consumed, annotationForceReplicas)
			}
		}
	}
	if !t.downscaleRules(w, &sp.Spec, &consumed) {
		ok = false
	}
	if len(consumed) == 0 && ok {
		return
	}
	if !ok {
		// A policy without the part that failed would act differently from
		// the Grafana operator (a follower without its delay, a guard without
		// its prepare call): write none, keep every key.
		t.fail(w.ref(), "", "no ScalingPolicy written and its keys left in place: fix this object's other errors and run migrate again")
		return
	}
	w.consume(consumed...)
	if equality.Semantic.DeepEqual(sp.Spec, v1alpha1.ScalingPolicySpec{TargetRef: sp.Spec.TargetRef}) {
		return // only keys that ask for nothing (no-downscale "false", a zone delay of 0)
	}
	sp.ObjectMeta = objectMeta(w.namespace, t.policyName(w))
	t.result.ScalingPolicies = append(t.result.ScalingPolicies, sp)
}

// policyName is the workload's name, or for a Deployment or ReplicaSet whose
// name a StatefulSet's policy already uses, the name with its kind.
func (t *translation) policyName(w *workload) string {
	if t.policies == nil {
		t.policies = map[string]bool{}
	}
	name := w.name
	if t.policies[w.namespace+"/"+name] {
		name = w.name + "-" + strings.ToLower(w.kind)
	}
	t.policies[w.namespace+"/"+name] = true
	return name
}

// replicasSource reads the leader or the reference resource of a StatefulSet.
func (t *translation) replicasSource(w *workload, spec *v1alpha1.ScalingPolicySpec, consumed *[]string) bool {
	leader, hasLeader := w.annotations[annotationLeader]
	kind, hasKind := w.annotations[annotationMirrorKind]
	name, hasName := w.annotations[annotationMirrorName]
	apiVersion, hasAPIVersion := w.annotations[annotationMirrorAPI]
	hasResource := hasKind || hasName || hasAPIVersion
	ok := true
	switch {
	case hasLeader && hasResource:
		t.fail(w.ref(), annotationLeader, "both a leader and a reference resource (%s): a ScalingPolicy follows one source; remove one", annotationMirrorKind)
		return false
	case hasLeader:
		l := t.statefulSet(w.namespace, leader)
		switch {
		case leader == w.name:
			t.fail(w.ref(), annotationLeader, "the StatefulSet leads itself")
			ok = false
		case l == nil:
			t.fail(w.ref(), annotationLeader, "leader %q is not in the input: add its manifest (or migrate the whole namespace); a ScalingPolicy with a missing leader scales nothing", leader)
			ok = false
		case l.labels[labelRolloutGroup] != w.labels[labelRolloutGroup]:
			t.warn(w.ref(), annotationLeader, "leader %q is in rollout-group %q, this StatefulSet in %q: the zone delay counts the downscales of the target's group only", leader, l.labels[labelRolloutGroup], w.labels[labelRolloutGroup])
		}
		if ok {
			spec.ReplicasFrom = &v1alpha1.ReplicasSource{Leader: &v1alpha1.LeaderReference{Name: leader}}
			*consumed = append(*consumed, annotationLeader)
		}
	case hasResource:
		var missing []string
		for key, set := range map[string]bool{annotationMirrorAPI: hasAPIVersion, annotationMirrorKind: hasKind, annotationMirrorName: hasName} {
			if !set {
				missing = append(missing, key)
			}
		}
		if len(missing) > 0 {
			t.fail(w.ref(), annotationMirrorKind, "the reference resource needs api-version, kind and name: %s missing", strings.Join(slices.Sorted(slices.Values(missing)), ", "))
			return false
		}
		spec.ReplicasFrom = &v1alpha1.ReplicasSource{Resource: &v1alpha1.ScaleResourceReference{APIVersion: apiVersion, Kind: kind, Name: name}}
		*consumed = append(*consumed, annotationMirrorAPI, annotationMirrorKind, annotationMirrorName)
		if v, set := w.annotations[annotationMirrorWriteBack]; set {
			b, err := parseBool(v)
			if err != nil {
				t.fail(w.ref(), annotationMirrorWriteBack, "%v", err)
				return false
			}
			if !b {
				spec.WriteBack = new(false)
			}
			*consumed = append(*consumed, annotationMirrorWriteBack)
		}
		if v, set := w.get(keyMinTimeBetweenZones); set {
			if d, err := parseDuration(v); err == nil && d > 0 {
				t.warn(w.ref(), keyMinTimeBetweenZones, "the Grafana operator ignores the zone delay for a reference resource; Echelon honours it")
			}
		}
	}
	if v, set := w.annotations[annotationUpscaleReady]; set {
		b, err := parseBool(v)
		switch {
		case err != nil:
			t.fail(w.ref(), annotationUpscaleReady, "%v", err)
			ok = false
		case !hasLeader:
			t.warn(w.ref(), annotationUpscaleReady, "dropped: it applies only with %s", annotationLeader)
			*consumed = append(*consumed, annotationUpscaleReady)
		default:
			spec.UpscaleOnlyWhenLeaderReady = b
			*consumed = append(*consumed, annotationUpscaleReady)
		}
	}
	if _, set := w.annotations[annotationMirrorWriteBack]; set && !hasResource {
		t.warn(w.ref(), annotationMirrorWriteBack, "dropped: it applies only with a reference resource")
		*consumed = append(*consumed, annotationMirrorWriteBack)
	}
	return ok
}

// downscaleRules reads no-downscale and prepare-downscale.
func (t *translation) downscaleRules(w *workload, spec *v1alpha1.ScalingPolicySpec, consumed *[]string) bool {
	var rules v1alpha1.DownscaleRules
	set := false
	if v, ok := w.labels[labelNoDownscale]; ok {
		b, err := parseBool(v)
		if err != nil {
			t.fail(w.ref(), labelNoDownscale, "%v", err)
			return false
		}
		if b {
			rules.Allowed = new(false)
			set = true
		}
		*consumed = append(*consumed, labelNoDownscale)
	}
	prepare, hasPrepare := w.labels[labelPrepareDownscale]
	path, hasPath := w.annotations[annotationPreparePath]
	port, hasPort := w.annotations[annotationPreparePort]
	switch {
	case hasPrepare && w.sts == nil:
		t.fail(w.ref(), labelPrepareDownscale, "prepare-downscale applies to StatefulSets only")
		return false
	case hasPrepare:
		b, err := parseBool(prepare)
		if err != nil {
			t.fail(w.ref(), labelPrepareDownscale, "%v", err)
			return false
		}
		*consumed = append(*consumed, labelPrepareDownscale)
		if !b {
			break
		}
		if !hasPath || !hasPort {
			t.fail(w.ref(), labelPrepareDownscale, "needs %s and %s: the Grafana operator rejects every downscale of this StatefulSet without them", annotationPreparePath, annotationPreparePort)
			return false
		}
		n, err := strconv.Atoi(strings.TrimSpace(port))
		if err != nil || n < 1 || n > 65535 {
			t.fail(w.ref(), annotationPreparePort, "%q is not a port (1-65535)", port)
			return false
		}
		// The Grafana operator joins host and path with a "/": its users write
		// the path with or without one.
		rules.Prepare = &v1alpha1.PrepareDownscaleEndpoint{PrepareEndpoint: v1alpha1.PrepareEndpoint{Path: "/" + strings.TrimLeft(path, "/"), Port: int32(n)}}
		set = true
		*consumed = append(*consumed, annotationPreparePath, annotationPreparePort)
	case hasPath || hasPort:
		t.warn(w.ref(), annotationPreparePath, "dropped: the prepare-downscale path and port apply only with the %s label", labelPrepareDownscale)
		*consumed = append(*consumed, annotationPreparePath, annotationPreparePort)
	}
	if set {
		spec.Downscale = &rules
	}
	return true
}

// duration reads a Go duration ("12h", "1h30m") or a Prometheus one ("1d").
func (t *translation) duration(w *workload, key string) (*metav1.Duration, bool, bool) {
	v, set := w.get(key)
	if !set {
		return nil, false, false
	}
	d, err := parseDuration(v)
	if err != nil {
		t.fail(w.ref(), key, "%v", err)
		return nil, true, false
	}
	return &metav1.Duration{Duration: d}, true, true
}

func parseDuration(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	d, err := time.ParseDuration(v)
	if err != nil {
		md, merr := model.ParseDuration(v)
		if merr != nil {
			return 0, fmt.Errorf("%q is not a duration such as 12h or 1d", v)
		}
		d = time.Duration(md)
	}
	if d < 0 {
		return 0, fmt.Errorf("%q is negative", v)
	}
	return d, nil
}

// delayPattern is the DelayedDownscale's spec.delay format.
var delayPattern = regexp.MustCompile(`^(([0-9]+)(y|w|d|h|m|s|ms|us|µs|ns))+$`)

// delayedDownscale writes the DelayedDownscale of a StatefulSet with the
// delayed-downscale annotations.
func (t *translation) delayedDownscale(w *workload) {
	delay, hasDelay := w.annotations[annotationDelayedDelay]
	rawURL, hasURL := w.annotations[annotationDelayedURL]
	switch {
	case !hasDelay && !hasURL:
		return
	case !hasDelay || !hasURL:
		t.fail(w.ref(), annotationDelayedDelay, "delayed downscale needs both %s and %s", annotationDelayedDelay, annotationDelayedURL)
		return
	}
	ok := true
	delay = strings.TrimSpace(delay)
	if !delayPattern.MatchString(delay) {
		d, err := parseDuration(delay)
		if err != nil {
			t.fail(w.ref(), annotationDelayedDelay, "%v", err)
			ok = false
		} else {
			delay = model.Duration(d).String()
		}
	}
	endpoint, err := prepareEndpoint(rawURL)
	if err != nil {
		t.fail(w.ref(), annotationDelayedURL, "%v", err)
		ok = false
	}
	if !ok {
		return
	}
	dd := v1alpha1.DelayedDownscale{TypeMeta: typeMeta("DelayedDownscale"), ObjectMeta: objectMeta(w.namespace, w.name)}
	dd.Spec.TargetRef = v1alpha1.ScalingTargetReference{Kind: v1alpha1.TargetKindStatefulSet, Name: w.name}
	dd.Spec.Delay = delay
	dd.Spec.PrepareEndpoint = endpoint
	w.consume(annotationDelayedDelay, annotationDelayedURL)
	t.result.DelayedDownscales = append(t.result.DelayedDownscales, dd)
	switch source := t.source(w); {
	case source == nil:
		t.warn(w.ref(), annotationDelayedDelay, "no ScalingPolicy scales this StatefulSet (the Grafana operator delays downscales of a reference resource only): the DelayedDownscale stays Blocked until one does")
	case source.Resource == nil:
		t.warn(w.ref(), annotationDelayedDelay, "the Grafana operator delays downscales of a reference resource only, so it did not delay this StatefulSet's; Echelon will")
	}
}

// source is where the ScalingPolicy written for w takes its replicas from:
// nil when none was written or it has no replicasFrom.
func (t *translation) source(w *workload) *v1alpha1.ReplicasSource {
	for _, sp := range t.result.ScalingPolicies {
		if sp.Namespace == w.namespace && sp.Spec.TargetRef.Name == w.name && sp.Spec.TargetRef.IsStatefulSet() {
			return sp.Spec.ReplicasFrom
		}
	}
	return nil
}

// prepareEndpoint reads the delayed-downscale URL. The Grafana operator
// replaces its host with each pod's, so only scheme, port and path count.
func prepareEndpoint(raw string) (v1alpha1.PrepareEndpoint, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Host == "" {
		return v1alpha1.PrepareEndpoint{}, fmt.Errorf("%q is not a URL such as http://pod:8080/ingester/prepare-partition-downscale", raw)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return v1alpha1.PrepareEndpoint{}, fmt.Errorf("%q: the scheme must be http or https", raw)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return v1alpha1.PrepareEndpoint{}, fmt.Errorf("%q: a query or fragment cannot be carried over (prepareEndpoint has scheme, port and path)", raw)
	}
	port := 80
	if u.Scheme == "https" {
		port = 443
	}
	if p := u.Port(); p != "" {
		port, err = strconv.Atoi(p)
		if err != nil || port < 1 || port > 65535 {
			return v1alpha1.PrepareEndpoint{}, fmt.Errorf("%q: port %q is not 1-65535", raw, p)
		}
	}
	path := u.Path
	if path == "" {
		path = "/"
	}
	return v1alpha1.PrepareEndpoint{Scheme: u.Scheme, Port: int32(port), Path: path}, nil
}
