/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/e2e/framework"
	"github.com/echelon-operator/echelon/internal/options"
	"github.com/echelon-operator/echelon/test/builders"
)

// What the eviction and drain scenarios share: the three-zone group whose
// disruptionBudget judges evictions, and the operator's webhooks registered
// with the API server (serve, which the webhook scenario uses too), the
// eviction webhook's judged through it.

// createZones creates the group's member StatefulSets, place (if set)
// changing each first, and the group, whose disruptionBudget admits
// maxUnavailable evictions per zone.
func createZones(ctx context.Context, c client.Client, ns string, s scenario, place func(*appsv1.StatefulSet)) error {
	var objs []client.Object
	for _, name := range memberNames[:s.members] {
		sts := statefulSet(ns, name, s.replicas, oldImage)
		if place != nil {
			place(sts)
		}
		objs = append(objs, sts)
	}
	objs = append(objs, builders.MakeRolloutGroup(ns, groupName).Members(memberNames[:s.members]...).MaxUnavailable(s.maxUnavailable).
		DisruptionBudget(builders.MakeZoneBudget().MaxUnavailable(s.maxUnavailable)).Obj())
	return forEach(ctx, len(objs), createWorkers, func(ctx context.Context, i int) error {
		if err := c.Create(ctx, objs[i]); err != nil {
			return fmt.Errorf("create %T %s: %w", objs[i], objs[i].GetName(), err)
		}
		return nil
	})
}

// serve registers hooks at the run's port (a free one if none is set yet),
// keeps the clients' trust on the bundle the operator injects, and creates
// the operator's user with the rights on its certificate Secret and on the
// configuration that the chart grants. stop ends the watch of the bundle;
// call it before the control plane stops.
func (r *webhookRun) serve(ctx context.Context, hooks ...servedWebhook) (stop func(), _ error) {
	var err error
	if r.port == 0 {
		if r.port, err = framework.FreePort(); err != nil {
			return nil, err
		}
	}
	if err := registerWebhooks(ctx, r.cp.Client(), r.ns, r.port, hooks...); err != nil {
		return nil, err
	}
	if stop, err = r.watchBundle(ctx); err != nil {
		return nil, err
	}
	if r.user, err = r.cp.NewOperatorUser(ctx, "echelon-operator"); err != nil {
		stop()
		return nil, err
	}
	if err := r.cp.GrantWebhookCerts(ctx, r.user.Name, r.ns); err != nil {
		stop()
		return nil, err
	}
	// The generated RBAC lets the operator patch only the configurations
	// named echelon; the bench names its own per namespace, as an install
	// that renames them grants (docs/webhooks.md).
	if err := r.cp.GrantWebhookConfigurations(ctx, r.user.Name, webhookConfigName(r.ns)); err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}

// waitEvictionJudged asks the API server, in a dry run, to evict pod until
// the operator counts the eviction webhook's answer: the webhook
// configuration, the injected CA and the handler work together. The API
// server may take a moment to use a new webhook configuration.
func waitEvictionJudged(ctx context.Context, cfg runConfig, in *instance, cs kubernetes.Interface, ns, pod string) error {
	judged := func() (float64, error) {
		m, err := scrapeMetrics(in)
		if err != nil {
			return 0, err
		}
		return m.counters(evictionsMetric, nil)[""], nil
	}
	var last error
	err := withTimeout(ctx, cfg.timeout, func(ctx context.Context) error {
		return wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			before, err := judged()
			if err != nil {
				return false, err
			}
			last = cs.PolicyV1().Evictions(ns).Evict(ctx, &policyv1.Eviction{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pod}, DeleteOptions: &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}},
			})
			after, err := judged()
			if err != nil {
				return false, err
			}
			if last == nil && after == before {
				last = errors.New("admitted, but the eviction webhook did not count it: the API server does not call it yet")
			}
			return last == nil, nil
		})
	})
	if err != nil {
		return fmt.Errorf("a dry-run eviction of %s through the API server, judged by the eviction webhook: %v\n%s", pod, last, in.LogTail(30))
	}
	cfg.say("the API server asks the eviction webhook: a dry-run eviction of %s is judged and admitted", pod)
	return nil
}

// kubeAPIFlags are the operator's flags for a --kube-api-qps of qps, none
// for 0; and the QPS it then runs with.
func kubeAPIFlags(qps float64) ([]string, float64) {
	if qps <= 0 {
		return nil, options.Default().KubeAPIQPS
	}
	return []string{fmt.Sprintf("--kube-api-qps=%g", qps), fmt.Sprintf("--kube-api-burst=%d", int(2*qps))}, qps
}
