/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// uidPlaceholder stands where a review template's UID goes; requestUID
// returns UIDs of the same length.
const uidPlaceholder = "00000000-0000-0000-0000-000000000000"

// requestUID is the UID of the n-th request of a run: every request carries
// its own, as the API server's do, and the answer must echo it.
func requestUID(n uint64) string { return fmt.Sprintf("be000000-0000-4000-8000-%012x", n) }

// reviewTemplate is the AdmissionReview the API server sends the no-downscale
// webhook for an UPDATE of a StatefulSet's /scale (kubectl scale), marshalled
// once and split around its UID, so that the clients spend their CPU on
// HTTPS rather than on JSON.
type reviewTemplate struct {
	prefix, suffix []byte
	target         string // the StatefulSet
	policy         string // the ScalingPolicy that guards it
	allow          bool   // an increase, which the webhook must admit
}

// newReviewTemplate builds the review of scaling sts from one replica count to
// another, as the user bench-client with field manager kubectl-scale. policy
// is the ScalingPolicy a denial must name.
func newReviewTemplate(sts *appsv1.StatefulSet, policy string, from, to int32) (reviewTemplate, error) {
	scale := func(replicas int32) runtime.RawExtension {
		s := &autoscalingv1.Scale{
			TypeMeta: metav1.TypeMeta{APIVersion: "autoscaling/v1", Kind: "Scale"},
			ObjectMeta: metav1.ObjectMeta{
				Namespace: sts.Namespace, Name: sts.Name, UID: sts.UID,
				ResourceVersion: sts.ResourceVersion, CreationTimestamp: sts.CreationTimestamp,
			},
			Spec:   autoscalingv1.ScaleSpec{Replicas: replicas},
			Status: autoscalingv1.ScaleStatus{Replicas: from, Selector: metav1.FormatLabelSelector(sts.Spec.Selector)},
		}
		return runtime.RawExtension{Object: s}
	}
	options := &metav1.UpdateOptions{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "UpdateOptions"}, FieldManager: "kubectl-scale"}
	scaleKind := metav1.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}
	statefulSets := metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:      types.UID(uidPlaceholder),
			Kind:     scaleKind,
			Resource: statefulSets, SubResource: "scale",
			RequestKind: &scaleKind, RequestResource: &statefulSets, RequestSubResource: "scale",
			Name: sts.Name, Namespace: sts.Namespace,
			Operation: admissionv1.Update,
			UserInfo:  authenticationv1.UserInfo{Username: "bench-client", Groups: []string{"system:authenticated"}},
			Object:    scale(to), OldObject: scale(from),
			DryRun:  ptr.To(false),
			Options: runtime.RawExtension{Object: options},
		},
	}
	b, err := json.Marshal(review)
	if err != nil {
		return reviewTemplate{}, err
	}
	prefix, suffix, ok := bytes.Cut(b, []byte(uidPlaceholder))
	if !ok {
		return reviewTemplate{}, fmt.Errorf("review of %s: no UID placeholder in %s", sts.Name, b)
	}
	return reviewTemplate{prefix: prefix, suffix: suffix, target: sts.Name, policy: policy, allow: to >= from}, nil
}

// body is the review with uid.
func (t reviewTemplate) body(uid string) []byte {
	b := make([]byte, 0, len(t.prefix)+len(uid)+len(t.suffix))
	return append(append(append(b, t.prefix...), uid...), t.suffix...)
}

// Kinds of failed request, as the table and the JSON count them.
const (
	failTransport = "transport"  // no answer: connection, TLS or timeout
	failStatus    = "http"       // an answer, but not 200
	failAnswer    = "bad answer" // not an AdmissionReview for this request
	failDecision  = "wrong decision"
)

// reviewAnswer is the part of the webhook's AdmissionReview the bench reads.
type reviewAnswer struct {
	Response *struct {
		UID     string `json:"uid"`
		Allowed bool   `json:"allowed"`
		Status  *struct {
			Message string `json:"message"`
		} `json:"status"`
	} `json:"response"`
}

// checkAnswer judges the webhook's answer to the review t with uid: "" when
// right, else the kind of failure and what was wrong. A denial is right only
// when its message names the guarding policy, which proves the webhook looked
// the policy up rather than refusing everything.
func checkAnswer(t reviewTemplate, uid string, status int, body []byte) (kind, detail string) {
	if status != http.StatusOK {
		return failStatus, fmt.Sprintf("HTTP %d: %s", status, truncate(body, 200))
	}
	var a reviewAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		return failAnswer, fmt.Sprintf("not JSON: %v: %s", err, truncate(body, 200))
	}
	switch r := a.Response; {
	case r == nil:
		return failAnswer, fmt.Sprintf("no response: %s", truncate(body, 200))
	case r.UID != uid:
		return failAnswer, fmt.Sprintf("response UID %q to request %q", r.UID, uid)
	case r.Allowed != t.allow:
		return failDecision, fmt.Sprintf("%s: allowed=%t, want %t: %s", t.target, r.Allowed, t.allow, truncate(body, 200))
	case !r.Allowed && (r.Status == nil || !strings.Contains(r.Status.Message, t.policy)):
		return failDecision, fmt.Sprintf("%s: the denial does not name ScalingPolicy %s: %s", t.target, t.policy, truncate(body, 200))
	}
	return "", ""
}

func truncate(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "..."
}
