package webhooks

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/echelon-operator/echelon/internal/disruption"
	"github.com/echelon-operator/echelon/internal/metrics"
	"github.com/echelon-operator/echelon/internal/scaling"
	"github.com/echelon-operator/echelon/test/builders"
)

// TestBudgetDownscale: the downscale-budget webhook asks a member's group's
// disruption budget about every downscale no ScalingPolicy judges already,
// recording it when allowed (not for a dry run), refusing it with the
// group, the zone and why otherwise; anything else it lets through without
// asking.
func TestBudgetDownscale(t *testing.T) {
	member := func(c *fakeCluster) { c.group = &scaling.Group{Name: "ingester"} }
	policy := func(edit func(*builders.ScalingPolicyWrapper)) func(c *fakeCluster) {
		return func(c *fakeCluster) {
			member(c)
			b := builders.MakeScalingPolicy(testNS, "a-scaling").Target("StatefulSet", "a")
			edit(b)
			c.policies = append(c.policies, *b.Obj())
		}
	}
	heldByB := &disruption.Verdict{Code: disruption.CodeOtherZoneDisrupted, Message: "zone b (1 not available) is disrupted", RetryAfter: 3 * time.Second}
	for _, tc := range []struct {
		name    string
		setup   func(c *fakeCluster)
		req     func() *reqBuilder
		budget  *disruption.Verdict
		err     error
		allowed bool
		code    int32
		reason  string
		message string
		event   bool
		asked   string
	}{
		{name: "kubectl scale of a member: asked, recorded, admitted", setup: member,
			req: func() *reqBuilder { return scaleUpdate("statefulsets", "a", 5, 3) }, allowed: true, reason: reasonRecorded,
			asked: `ingester Downscale a -2 by "downscale of StatefulSet a by alice"`},
		{name: "spec.replicas lowered: the same", setup: member,
			req: func() *reqBuilder { return stsUpdate("a", 5, 4) }, allowed: true, reason: reasonRecorded,
			asked: `ingester Downscale a -1 by "downscale of StatefulSet a by alice"`},
		{name: "dry run: asked without a record", setup: member,
			req: func() *reqBuilder { return scaleUpdate("statefulsets", "a", 5, 3).dryRun() }, allowed: true, reason: reasonDryRun,
			asked: `ingester Downscale a -2 by "downscale of StatefulSet a by alice" dry-run`},
		{name: "the budget says no: refused naming the group, the zone and why, with a Warning Event", setup: member,
			req: func() *reqBuilder { return scaleUpdate("statefulsets", "a", 5, 3) }, budget: heldByB, code: http.StatusForbidden, reason: reasonDisruption,
			message: "downscale of StatefulSet a from 5 to 3 denied: the disruption budget of RolloutGroup ingester lets one zone at a time lose pods: zone b (1 not available) is disrupted; retry in 3s",
			event:   true, asked: `ingester Downscale a -2 by "downscale of StatefulSet a by alice"`},
		{name: "a dry run is refused too, and records no Event", setup: member,
			req: func() *reqBuilder { return stsUpdate("a", 5, 3).dryRun() }, budget: heldByB, code: http.StatusForbidden, reason: reasonDisruption,
			message: "downscale of StatefulSet a from 5 to 3 denied: the disruption budget of RolloutGroup ingester",
			asked:   `ingester Downscale a -2 by "downscale of StatefulSet a by alice" dry-run`},
		{name: "the budget cannot be read: an error, not a verdict", setup: member,
			req: func() *reqBuilder { return stsUpdate("a", 5, 3) }, err: errors.New("RolloutGroup ingester: etcd is slow"),
			code: http.StatusInternalServerError, reason: reasonLookupFailed, message: "downscale of StatefulSet a from 5 to 3: RolloutGroup ingester: etcd is slow",
			asked: `ingester Downscale a -2 by "downscale of StatefulSet a by alice"`},
		{name: "no group claims it: not asked",
			req: func() *reqBuilder { return scaleUpdate("statefulsets", "a", 5, 3) }, allowed: true, reason: reasonNotMember},
		{name: "growth: not asked", setup: member,
			req: func() *reqBuilder { return stsUpdate("a", 3, 5) }, allowed: true, reason: reasonNotDecrease},
		{name: "a ScalingPolicy prepares its downscales: the prepare-downscale webhook has judged it",
			setup: policy(func(b *builders.ScalingPolicyWrapper) { b.Prepare("/prepare", 8080, time.Second) }),
			req:   func() *reqBuilder { return stsUpdate("a", 5, 3) }, allowed: true, reason: reasonPrepareGuarded},
		{name: "a ScalingPolicy forbids it: the no-downscale webhook refuses it",
			setup: policy(func(b *builders.ScalingPolicyWrapper) { b.DownscaleAllowed(false) }),
			req:   func() *reqBuilder { return stsUpdate("a", 5, 3) }, allowed: true, reason: reasonForbidden},
		{name: "a ScalingPolicy that only delays zones: asked",
			setup: policy(func(b *builders.ScalingPolicyWrapper) { b.ZoneDelay(time.Hour) }),
			req:   func() *reqBuilder { return stsUpdate("a", 5, 3) }, allowed: true, reason: reasonRecorded,
			asked: `ingester Downscale a -2 by "downscale of StatefulSet a by alice"`},
		{name: "the ScalingPolicy controller's own downscale: it recorded it itself",
			setup: policy(func(b *builders.ScalingPolicyWrapper) { b.Leader("z") }),
			req:   func() *reqBuilder { return stsUpdate("a", 5, 3).operatorOwn() }, allowed: true, reason: reasonOperatorOwn},
		{name: "kubectl scale of a StatefulSet not in the cache yet: an error", setup: func(c *fakeCluster) { member(c); c.sets = nil },
			req: func() *reqBuilder { return scaleUpdate("statefulsets", "a", 5, 3) }, code: http.StatusInternalServerError, reason: reasonLookupFailed,
			message: "StatefulSet a is not in the operator's cache yet"},
		{name: "Deployments are not judged",
			req: func() *reqBuilder { return scaleUpdate("deployments", "a", 5, 3) }, allowed: true, reason: reasonUnhandled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cluster := &fakeCluster{sets: []appsv1.StatefulSet{*builders.MakeStatefulSet(testNS, "a").Replicas(5).TypeMeta().Obj()}}
			if tc.setup != nil {
				tc.setup(cluster)
			}
			budget := allowingBudget()
			if tc.budget != nil {
				budget.answer = *tc.budget
			}
			budget.err = tc.err
			events := &eventRecorder{}
			webhook := "test-downscale-budget"
			decision := decisionOf(tc.allowed, tc.code)
			before := testutil.ToFloat64(metrics.WebhookRequests.WithLabelValues(webhook, decision, tc.reason))
			h := &BudgetDownscale{Cluster: cluster, Budget: budget, Identity: Identity{Username: operatorUser}}
			a := serve(t, handler(webhook, h, events), tc.req().review(), "timeout=10s")
			checkAnswer(t, a, tc.allowed, tc.code, tc.message, "")
			if got := testutil.ToFloat64(metrics.WebhookRequests.WithLabelValues(webhook, decision, tc.reason)) - before; got != 1 {
				t.Errorf("%s/%s counted %v times, want 1", decision, tc.reason, got)
			}
			if got := budget.questions(); got != tc.asked {
				t.Errorf("asked the disruption budget %q, want %q", got, tc.asked)
			}
			if tc.event {
				checkEvent(t, events.list(), EventReasonDownscaleTooEarly, "StatefulSet/a", a.message())
			} else {
				checkEvent(t, events.list(), "", "", "")
			}
		})
	}
}
