/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// failRefused is an eviction answered 429, as the eviction webhook refuses
// one: right for a real eviction past the zone's budget, wrong for a dry run
// the budget allows.
const failRefused = "refused"

// apiLoad sends requests through the API server as kubectl would, from a
// fixed number of clients sharing one client-go clientset (one HTTP/2
// connection), open loop as loadClient does: latency runs from a request's
// queueing to its answer, the API server's admission and the webhook's call
// included.
type apiLoad struct {
	clients int
	sent    atomic.Uint64
	send    sendFunc
}

func (l *apiLoad) run(ctx context.Context, plan loadPlan) loadRun {
	return runOpenLoop(ctx, plan, l.clients, &l.sent, l.send)
}

// evictionSender evicts the pods in turn, the n-th request the
// ((n-1) mod len)-th pod, in a dry run as `kubectl drain --dry-run=server`
// asks (the dry run in the Eviction's deleteOptions) when dryRun.
func evictionSender(cs kubernetes.Interface, ns string, pods []string, dryRun bool) sendFunc {
	return func(ctx context.Context, n uint64, _ bool) (kind, detail, proto string) {
		pod := pods[(n-1)%uint64(len(pods))]
		eviction := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pod}}
		if dryRun {
			eviction.DeleteOptions = &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}
		}
		kind, detail = judgeEviction(cs.PolicyV1().Evictions(ns).Evict(ctx, eviction))
		return kind, detail, ""
	}
}

// judgeEviction classifies the API server's answer to an eviction.
func judgeEviction(err error) (kind, detail string) {
	switch {
	case err == nil:
		return "", ""
	case apierrors.IsTooManyRequests(err):
		return failRefused, err.Error()
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		return failTransport, err.Error()
	default:
		return failStatus, err.Error()
	}
}

// scaleSender scales the guarded StatefulSets in turn through /scale in a
// dry run, as `kubectl scale --dry-run=server` does, in the mix of the
// webhook scenario (reviewTemplates): one request in increaseEvery grows a
// StatefulSet, which the no-downscale webhook admits; the others shrink one,
// which it must deny naming the StatefulSet's ScalingPolicy.
func scaleSender(cs kubernetes.Interface, ns string, guarded int) sendFunc {
	return func(ctx context.Context, n uint64, _ bool) (kind, detail, proto string) {
		k := int((n - 1) % uint64(guarded*increaseEvery))
		i := k % guarded
		to, grow := int32(guardedReplicas-1), isIncrease(k, guarded)
		if grow {
			to = guardedReplicas + 1
		}
		scale := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: guardedName(i)}, Spec: autoscalingv1.ScaleSpec{Replicas: to}}
		_, err := cs.AppsV1().StatefulSets(ns).UpdateScale(ctx, guardedName(i), scale, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		kind, detail = judgeScale(err, grow, policyName(i))
		return kind, detail, ""
	}
}

// judgeScale classifies the API server's answer to a dry-run scale of a
// StatefulSet guarded by policy: a growth must pass, a shrink must be denied
// by the webhook naming policy.
func judgeScale(err error, grow bool, policy string) (kind, detail string) {
	switch {
	case grow && err == nil, !grow && err != nil && strings.Contains(err.Error(), policy):
		return "", ""
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		return failTransport, err.Error()
	case grow:
		return failStatus, err.Error()
	case err == nil:
		return failDecision, "a shrink passed: the no-downscale webhook did not deny it"
	default:
		return failDecision, fmt.Sprintf("the denial does not name ScalingPolicy %s: %v", policy, err)
	}
}
