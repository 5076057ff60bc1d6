package scaling

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/disruption"
)

var now = time.Date(2026, time.June, 1, 12, 0, 0, 0, time.UTC)

// follower is zone-b following leader zone-a, at current replicas, the leader
// asking for source, in a group whose other members were never downscaled and
// whose disruption budget allows a downscale.
func follower(current, source int32) Input {
	return Input{
		Now:    now,
		Target: &Target{Name: "zone-b", Replicas: current, StatusReplicas: current, ReadyReplicas: current},
		Source: Source{Kind: SourceLeader, Name: "leader zone-a", Replicas: ptr.To(source), LeaderReady: true},
		Group: &Group{Name: "ingester", Others: []Member{
			{Name: "zone-a"}, {Name: "zone-c"},
		}},
		Disruption: &disruption.Verdict{Allowed: true},
	}
}

// refused is a refusal of the disruption budget.
func refused(code, message string, retry time.Duration) *disruption.Verdict {
	return &disruption.Verdict{Code: code, Message: message, RetryAfter: retry}
}

func with(in Input, change func(*Input)) Input {
	change(&in)
	return in
}

type want struct {
	phase   v1alpha1.ScalingPhase
	reason  string
	scale   *int32
	requeue time.Duration
	message string
	// ask is the downscale the plan asks the disruption budget about.
	ask *int32
}

func TestDownscaleGate(t *testing.T) {
	delay := time.Hour
	group := func(members ...Member) *Group { return &Group{Name: "ingester", Others: members} }
	tests := []struct {
		name   string
		delay  time.Duration
		group  *Group
		open   bool
		reason string
		until  time.Time
	}{
		{name: "no group", delay: delay, open: true},
		{name: "never downscaled", delay: delay, group: group(Member{Name: "a"}, Member{Name: "c"}), open: true},
		{name: "inside the delay", delay: delay, group: group(Member{Name: "a", LastDownscale: now.Add(-time.Minute)}),
			reason: v1alpha1.ScalingReasonZoneDelay, until: now.Add(59*time.Minute + recordLead)},
		{name: "the delay just ended", delay: delay, group: group(Member{Name: "a", LastDownscale: now.Add(-delay - recordLead)}), open: true},
		{name: "the delay is counted from a second after the record", delay: delay, group: group(Member{Name: "a", LastDownscale: now.Add(-delay)}),
			reason: v1alpha1.ScalingReasonZoneDelay, until: now.Add(recordLead)},
		{name: "no delay", group: group(Member{Name: "a", LastDownscale: now}), open: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := DownscaleGate(now, tt.delay, tt.group)
			if g.Open != tt.open || g.Reason != tt.reason || !g.Until.Equal(tt.until) {
				t.Errorf("gate = %+v, want open %v reason %q until %s", g, tt.open, tt.reason, tt.until)
			}
			if !g.Open && g.Why == "" {
				t.Error("a closed gate must say why")
			}
		})
	}
}

func TestDecide(t *testing.T) {
	delay := 12 * time.Hour
	tests := []struct {
		name string
		in   Input
		want want
	}{{
		name: "no source: guards only, never scales, whatever the group",
		in: with(follower(5, 5), func(in *Input) {
			in.Source = Source{Kind: SourceNone}
			in.Disruption = refused(disruption.CodeOtherZoneDisrupted, "zone zone-a (1 missing) is disrupted", 0)
		}),
		want: want{phase: v1alpha1.ScalingPhaseStable, reason: v1alpha1.ScalingReasonGuardOnly, message: "only guards downscales"},
	}, {
		name: "no source but forceReplicas: scaled to it",
		in: with(follower(5, 5), func(in *Input) {
			in.Source = Source{Kind: SourceNone}
			in.Force = ptr.To[int32](7)
		}),
		want: want{phase: v1alpha1.ScalingPhaseScalingUp, reason: v1alpha1.ScalingReasonScaledUp, scale: ptr.To[int32](7)},
	}, {
		name: "at the source's replicas: Stable",
		in:   follower(5, 5),
		want: want{phase: v1alpha1.ScalingPhaseStable, reason: v1alpha1.ScalingReasonAtDesiredReplicas},
	}, {
		name: "at the replicas, pods still being created: ScalingUp",
		in:   with(follower(5, 5), func(in *Input) { in.Target.StatusReplicas = 3 }),
		want: want{phase: v1alpha1.ScalingPhaseScalingUp, reason: v1alpha1.ScalingReasonAtDesiredReplicas},
	}, {
		name: "at replicas already settled, a pod being replaced (a rollout): Stable, not ScalingUp",
		in: with(follower(5, 5), func(in *Input) {
			in.Target.StatusReplicas = 4
			in.SettledAt = ptr.To[int32](5)
		}),
		want: want{phase: v1alpha1.ScalingPhaseStable, reason: v1alpha1.ScalingReasonAtDesiredReplicas, message: "5 replicas, as desired"},
	}, {
		name: "settled at other replicas (scaled up since): pods still being created: ScalingUp",
		in: with(follower(5, 5), func(in *Input) {
			in.Target.StatusReplicas = 4
			in.SettledAt = ptr.To[int32](3)
		}),
		want: want{phase: v1alpha1.ScalingPhaseScalingUp, reason: v1alpha1.ScalingReasonAtDesiredReplicas, message: "4 of them created so far"},
	}, {
		name: "at the replicas, pods still leaving: ScalingDown",
		in:   with(follower(5, 5), func(in *Input) { in.Target.StatusReplicas = 7 }),
		want: want{phase: v1alpha1.ScalingPhaseScalingDown, reason: v1alpha1.ScalingReasonAtDesiredReplicas},
	}, {
		name: "upscale at once",
		in:   follower(5, 8),
		want: want{phase: v1alpha1.ScalingPhaseScalingUp, reason: v1alpha1.ScalingReasonScaledUp, scale: ptr.To[int32](8)},
	}, {
		name: "upscale ignores the zone delay and the disruption budget",
		in: with(follower(5, 8), func(in *Input) {
			in.ZoneDelay = delay
			in.Group.Others = []Member{{Name: "zone-a", LastDownscale: now.Add(-time.Minute)}}
			in.Disruption = refused(disruption.CodeOtherZoneDisrupted, "zone zone-a (1 missing) is disrupted", 0)
		}),
		want: want{phase: v1alpha1.ScalingPhaseScalingUp, reason: v1alpha1.ScalingReasonScaledUp, scale: ptr.To[int32](8)},
	}, {
		name: "upscale waits for a leader that is not Ready, with upscaleOnlyWhenLeaderReady",
		in: with(follower(5, 8), func(in *Input) {
			in.UpscaleOnlyWhenLeaderReady = true
			in.Source.LeaderReady = false
		}),
		want: want{phase: v1alpha1.ScalingPhaseWaiting, reason: v1alpha1.ScalingReasonLeaderNotReady, message: "leader zone-a"},
	}, {
		name: "a leader that is not Ready does not hold the upscale without upscaleOnlyWhenLeaderReady",
		in:   with(follower(5, 8), func(in *Input) { in.Source.LeaderReady = false }),
		want: want{phase: v1alpha1.ScalingPhaseScalingUp, reason: v1alpha1.ScalingReasonScaledUp, scale: ptr.To[int32](8)},
	}, {
		name: "upscaleOnlyWhenLeaderReady does not hold a downscale",
		in: with(follower(8, 5), func(in *Input) {
			in.UpscaleOnlyWhenLeaderReady = true
			in.Source.LeaderReady = false
		}),
		want: want{phase: v1alpha1.ScalingPhaseScalingDown, reason: v1alpha1.ScalingReasonScaledDown, scale: ptr.To[int32](5)},
	}, {
		name: "downscale with no other member downscaled: at once",
		in:   with(follower(8, 5), func(in *Input) { in.ZoneDelay = delay }),
		want: want{phase: v1alpha1.ScalingPhaseScalingDown, reason: v1alpha1.ScalingReasonScaledDown, scale: ptr.To[int32](5)},
	}, {
		name: "downscale inside the zone delay waits, and looks again exactly when it ends",
		in: with(follower(8, 5), func(in *Input) {
			in.ZoneDelay = delay
			in.Group.Others[1].LastDownscale = now.Add(-delay + time.Minute)
		}),
		want: want{phase: v1alpha1.ScalingPhaseWaiting, reason: v1alpha1.ScalingReasonZoneDelay, requeue: time.Minute + recordLead, message: "zone-c was downscaled"},
	}, {
		name: "downscale one nanosecond before the delay ends waits",
		in: with(follower(8, 5), func(in *Input) {
			in.ZoneDelay = delay
			in.Group.Others[0].LastDownscale = now.Add(-delay - recordLead + time.Nanosecond)
		}),
		want: want{phase: v1alpha1.ScalingPhaseWaiting, reason: v1alpha1.ScalingReasonZoneDelay, requeue: time.Nanosecond},
	}, {
		name: "downscale exactly when the delay ends goes ahead",
		in: with(follower(8, 5), func(in *Input) {
			in.ZoneDelay = delay
			in.Group.Others[0].LastDownscale = now.Add(-delay - recordLead)
		}),
		want: want{phase: v1alpha1.ScalingPhaseScalingDown, reason: v1alpha1.ScalingReasonScaledDown, scale: ptr.To[int32](5)},
	}, {
		name: "the latest downscale of the other members counts",
		in: with(follower(8, 5), func(in *Input) {
			in.ZoneDelay = delay
			in.Group.Others[0].LastDownscale = now.Add(-2 * delay)
			in.Group.Others[1].LastDownscale = now.Add(-time.Hour)
		}),
		want: want{phase: v1alpha1.ScalingPhaseWaiting, reason: v1alpha1.ScalingReasonZoneDelay, requeue: delay - time.Hour + recordLead},
	}, {
		name: "no zone delay: another member's recent downscale does not hold it",
		in:   with(follower(8, 5), func(in *Input) { in.Group.Others[0].LastDownscale = now.Add(-time.Second) }),
		want: want{phase: v1alpha1.ScalingPhaseScalingDown, reason: v1alpha1.ScalingReasonScaledDown, scale: ptr.To[int32](5)},
	}, {
		name: "downscale of a member not judged by the disruption budget yet: waits and asks",
		in:   with(follower(8, 5), func(in *Input) { in.Disruption = nil }),
		want: want{phase: v1alpha1.ScalingPhaseWaiting, reason: v1alpha1.ScalingReasonDisruption, ask: ptr.To[int32](5),
			message: "once the disruption budget of RolloutGroup ingester allows it"},
	}, {
		name: "downscale waits while another zone is disrupted, until its pods change",
		in: with(follower(8, 5), func(in *Input) {
			in.Disruption = refused(disruption.CodeOtherZoneDisrupted, "zone zone-c (1 terminating) is disrupted", 0)
		}),
		want: want{phase: v1alpha1.ScalingPhaseWaiting, reason: v1alpha1.ScalingReasonDisruption,
			message: "waits for the disruption budget of RolloutGroup ingester: zone zone-c (1 terminating) is disrupted"},
	}, {
		name: "downscale waits while another zone holds the budget, and looks again when the hold lapses",
		in: with(follower(8, 5), func(in *Input) {
			in.Disruption = refused(disruption.CodeHeldByOtherZone, "zone zone-c holds the disruption budget (Eviction, eviction of pod zone-c-3)", 9*time.Second)
		}),
		want: want{phase: v1alpha1.ScalingPhaseWaiting, reason: v1alpha1.ScalingReasonDisruption, requeue: 9 * time.Second, message: "(Eviction, eviction of pod zone-c-3)"},
	}, {
		name: "downscale waits for a rollout of the group, in any member",
		in: with(follower(8, 5), func(in *Input) {
			in.Disruption = refused(disruption.CodeRolloutInProgress, "a rollout of the group is under way (at zone-a)", 0)
		}),
		want: want{phase: v1alpha1.ScalingPhaseWaiting, reason: v1alpha1.ScalingReasonRollout, message: "(at zone-a)"},
	}, {
		name: "the zone delay is told before the disruption budget",
		in: with(follower(8, 5), func(in *Input) {
			in.ZoneDelay = delay
			in.Group.Others[0].LastDownscale = now.Add(-time.Hour)
			in.Disruption = nil
		}),
		want: want{phase: v1alpha1.ScalingPhaseWaiting, reason: v1alpha1.ScalingReasonZoneDelay, requeue: delay - time.Hour + recordLead},
	}, {
		name: "a target in no RolloutGroup needs no disruption budget",
		in:   with(follower(8, 5), func(in *Input) { in.Group, in.Disruption = nil, nil }),
		want: want{phase: v1alpha1.ScalingPhaseScalingDown, reason: v1alpha1.ScalingReasonScaledDown, scale: ptr.To[int32](5)},
	}, {
		name: "a target in no RolloutGroup downscales at once",
		in:   with(follower(8, 5), func(in *Input) { in.Group, in.ZoneDelay = nil, delay }),
		want: want{phase: v1alpha1.ScalingPhaseScalingDown, reason: v1alpha1.ScalingReasonScaledDown, scale: ptr.To[int32](5)},
	}, {
		name: "no scale, either way, while the group rolls the target",
		in:   with(follower(5, 8), func(in *Input) { in.Group.RollingTarget = true }),
		want: want{phase: v1alpha1.ScalingPhaseWaiting, reason: v1alpha1.ScalingReasonRollout, message: "RolloutGroup ingester is rolling"},
	}, {
		name: "no downscale while the group rolls the target",
		in:   with(follower(8, 5), func(in *Input) { in.Group.RollingTarget = true }),
		want: want{phase: v1alpha1.ScalingPhaseWaiting, reason: v1alpha1.ScalingReasonRollout},
	}, {
		name: "forceReplicas overrides the source",
		in:   with(follower(5, 8), func(in *Input) { in.Force = ptr.To[int32](3) }),
		want: want{phase: v1alpha1.ScalingPhaseScalingDown, reason: v1alpha1.ScalingReasonScaledDown, scale: ptr.To[int32](3), message: "forceReplicas"},
	}, {
		name: "forceReplicas applies even when the source is missing",
		in: with(follower(5, 8), func(in *Input) {
			in.Force = ptr.To[int32](6)
			in.Source = Source{Kind: SourceLeader, Name: "leader zone-a", Problem: "leader StatefulSet zone-a does not exist", ProblemReason: v1alpha1.ScalingReasonSourceNotFound}
		}),
		want: want{phase: v1alpha1.ScalingPhaseScalingUp, reason: v1alpha1.ScalingReasonScaledUp, scale: ptr.To[int32](6)},
	}, {
		name: "a forced downscale still honours the zone delay",
		in: with(follower(8, 5), func(in *Input) {
			in.Force, in.ZoneDelay = ptr.To[int32](2), delay
			in.Group.Others[0].LastDownscale = now.Add(-time.Hour)
		}),
		want: want{phase: v1alpha1.ScalingPhaseWaiting, reason: v1alpha1.ScalingReasonZoneDelay, requeue: delay - time.Hour + recordLead},
	}, {
		name: "a forced upscale does not wait for the leader",
		in: with(follower(5, 5), func(in *Input) {
			in.Force, in.UpscaleOnlyWhenLeaderReady, in.Source.LeaderReady = ptr.To[int32](7), true, false
		}),
		want: want{phase: v1alpha1.ScalingPhaseScalingUp, reason: v1alpha1.ScalingReasonScaledUp, scale: ptr.To[int32](7)},
	}, {
		name: "paused freezes replicas",
		in:   with(follower(5, 8), func(in *Input) { in.Paused = true }),
		want: want{phase: v1alpha1.ScalingPhasePaused, reason: v1alpha1.ScalingReasonPaused, message: "frozen at 5"},
	}, {
		name: "paused freezes forced replicas too",
		in:   with(follower(5, 8), func(in *Input) { in.Paused, in.Force = true, ptr.To[int32](1) }),
		want: want{phase: v1alpha1.ScalingPhasePaused, reason: v1alpha1.ScalingReasonPaused},
	}, {
		name: "a missing target blocks",
		in:   with(follower(5, 8), func(in *Input) { in.Target = nil }),
		want: want{phase: v1alpha1.ScalingPhaseBlocked, reason: v1alpha1.ScalingReasonTargetNotFound},
	}, {
		name: "a target claimed by two policies blocks both",
		in:   with(follower(5, 8), func(in *Input) { in.ClaimedBy = []string{"other"} }),
		want: want{phase: v1alpha1.ScalingPhaseBlocked, reason: v1alpha1.ScalingReasonTargetClaimedByOtherPolicy, message: "ScalingPolicy other"},
	}, {
		name: "a missing source blocks",
		in: with(follower(5, 8), func(in *Input) {
			in.Source = Source{Kind: SourceResource, Name: "ReplicaTemplate ingester", Problem: "ReplicaTemplate ingester does not exist", ProblemReason: v1alpha1.ScalingReasonSourceNotFound}
		}),
		want: want{phase: v1alpha1.ScalingPhaseBlocked, reason: v1alpha1.ScalingReasonSourceNotFound, message: "ReplicaTemplate ingester does not exist"},
	}, {
		name: "a source that cannot be read blocks",
		in: with(follower(5, 8), func(in *Input) {
			in.Source = Source{Kind: SourceResource, Name: "Widget w", Problem: "Widget w has no scale subresource", ProblemReason: v1alpha1.ScalingReasonSourceUnreadable}
		}),
		want: want{phase: v1alpha1.ScalingPhaseBlocked, reason: v1alpha1.ScalingReasonSourceUnreadable},
	}, {
		name: "a negative replica count from a source blocks rather than scale",
		in:   with(follower(5, 8), func(in *Input) { in.Source.Replicas = ptr.To[int32](-1) }),
		want: want{phase: v1alpha1.ScalingPhaseBlocked, reason: v1alpha1.ScalingReasonSourceUnreadable},
	}, {
		name: "scale to zero is allowed",
		in:   follower(2, 0),
		want: want{phase: v1alpha1.ScalingPhaseScalingDown, reason: v1alpha1.ScalingReasonScaledDown, scale: ptr.To[int32](0)},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Decide(tt.in)
			if p.Phase != tt.want.phase || p.Reason != tt.want.reason {
				t.Errorf("phase %s reason %s, want %s %s (message %q)", p.Phase, p.Reason, tt.want.phase, tt.want.reason, p.Message)
			}
			if (p.Scale == nil) != (tt.want.scale == nil) || p.Scale != nil && *p.Scale != *tt.want.scale {
				t.Errorf("Scale = %v, want %v", ptrString(p.Scale), ptrString(tt.want.scale))
			}
			if p.RequeueAfter != tt.want.requeue {
				t.Errorf("RequeueAfter = %s, want %s", p.RequeueAfter, tt.want.requeue)
			}
			if tt.want.reason == v1alpha1.ScalingReasonZoneDelay && !p.WaitingUntil.Equal(now.Add(tt.want.requeue)) {
				t.Errorf("WaitingUntil = %s, want %s", p.WaitingUntil, now.Add(tt.want.requeue))
			}
			if ptrString(p.AskDisruption) != ptrString(tt.want.ask) {
				t.Errorf("AskDisruption = %s, want %s", ptrString(p.AskDisruption), ptrString(tt.want.ask))
			}
			if !strings.Contains(p.Message, tt.want.message) {
				t.Errorf("message %q does not contain %q", p.Message, tt.want.message)
			}
		})
	}
}

func ptrString(p *int32) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprint(*p)
}

func TestDecideWithADelayedDownscale(t *testing.T) {
	tests := []struct {
		name string
		in   Input
		want want
	}{{
		name: "no pod prepared long enough: the downscale waits",
		in:   with(follower(8, 5), func(in *Input) { in.Floor, in.FloorSource = ptr.To[int32](8), "ingester-zone-b" }),
		want: want{phase: v1alpha1.ScalingPhaseWaiting, reason: v1alpha1.ScalingReasonDelayedDownscale, message: "DelayedDownscale ingester-zone-b"},
	}, {
		name: "some pods prepared long enough: a partial downscale",
		in:   with(follower(8, 5), func(in *Input) { in.Floor, in.FloorSource = ptr.To[int32](6), "dd" }),
		want: want{phase: v1alpha1.ScalingPhaseScalingDown, reason: v1alpha1.ScalingReasonScaledDown, scale: ptr.To[int32](6), message: "as far as DelayedDownscale dd allows"},
	}, {
		name: "every pod prepared long enough: the whole downscale",
		in:   with(follower(8, 5), func(in *Input) { in.Floor, in.FloorSource = ptr.To[int32](5), "dd" }),
		want: want{phase: v1alpha1.ScalingPhaseScalingDown, reason: v1alpha1.ScalingReasonScaledDown, scale: ptr.To[int32](5)},
	}, {
		name: "the zone delay still holds a downscale the DelayedDownscale allows",
		in: with(follower(8, 5), func(in *Input) {
			in.Floor, in.ZoneDelay = ptr.To[int32](5), time.Hour
			in.Group.Others[0].LastDownscale = now.Add(-time.Minute)
		}),
		want: want{phase: v1alpha1.ScalingPhaseWaiting, reason: v1alpha1.ScalingReasonZoneDelay, requeue: 59*time.Minute + recordLead},
	}, {
		name: "a partial downscale asks the disruption budget about the floor",
		in: with(follower(8, 5), func(in *Input) {
			in.Floor, in.FloorSource, in.Disruption = ptr.To[int32](6), "dd", nil
		}),
		want: want{phase: v1alpha1.ScalingPhaseWaiting, reason: v1alpha1.ScalingReasonDisruption, ask: ptr.To[int32](6), message: "from 8 to 6"},
	}, {
		name: "no pod prepared long enough: nothing to ask the disruption budget",
		in:   with(follower(8, 5), func(in *Input) { in.Floor, in.FloorSource, in.Disruption = ptr.To[int32](8), "dd", nil }),
		want: want{phase: v1alpha1.ScalingPhaseWaiting, reason: v1alpha1.ScalingReasonDelayedDownscale},
	}, {
		name: "an upscale ignores the floor",
		in:   with(follower(5, 8), func(in *Input) { in.Floor = ptr.To[int32](5) }),
		want: want{phase: v1alpha1.ScalingPhaseScalingUp, reason: v1alpha1.ScalingReasonScaledUp, scale: ptr.To[int32](8)},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Decide(tt.in)
			if p.Phase != tt.want.phase || p.Reason != tt.want.reason || (p.Scale == nil) != (tt.want.scale == nil) ||
				p.Scale != nil && *p.Scale != *tt.want.scale || p.RequeueAfter != tt.want.requeue || !strings.Contains(p.Message, tt.want.message) ||
				ptrString(p.AskDisruption) != ptrString(tt.want.ask) {
				t.Errorf("got %s %s scale %s requeue %s ask %s message %q, want %+v", p.Phase, p.Reason, ptrString(p.Scale), p.RequeueAfter, ptrString(p.AskDisruption), p.Message, tt.want)
			}
		})
	}
}
