// Package scaling decides, without any client, whether and how far a
// ScalingPolicy scales its target StatefulSet now. The controller observes the
// target, the source and the target's RolloutGroup into an Input, calls Decide
// and carries out the result; every rule (zone delay, the group's disruption
// budget, leader Ready, the rollout interlock, force and pause) lives here,
// where it is tested with tables and fuzzed. The disruption budget's answer
// is an input: disruption.Decide gives it, on a view of the group's pods that
// the controller reads.
package scaling

import (
	"fmt"
	"strings"
	"time"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/disruption"
)

// SourceKind is where the desired replicas come from.
type SourceKind string

const (
	SourceLeader   SourceKind = "leader"
	SourceResource SourceKind = "resource"
	SourceSelf     SourceKind = "self"
	// SourceNone: the policy has no source and only guards downscales.
	SourceNone SourceKind = "none"
)

// Target is the observed target StatefulSet.
type Target struct {
	Name string
	// Replicas is spec.replicas (the API defaults it to 1).
	Replicas int32
	// StatusReplicas and ReadyReplicas are the StatefulSet controller's counts.
	StatusReplicas int32
	ReadyReplicas  int32
}

// Source is the observed source of the desired replicas.
type Source struct {
	Kind SourceKind
	// Name describes the source for messages: "leader zone-a", "ReplicaTemplate ingester", "self".
	Name string
	// Replicas is what the source asks for; nil when it could not be read.
	Replicas *int32
	// Problem, with its condition reason, says why the source cannot be used
	// (missing, no scale subresource, not readable); the policy is blocked.
	Problem       string
	ProblemReason string
	// LeaderReady is true when every replica of the leader is Ready (leader mode).
	LeaderReady bool
}

// Member is another StatefulSet of the target's RolloutGroup.
type Member struct {
	Name string
	// LastDownscale is when the member was last downscaled, from its
	// ScalingPolicy's status; zero when never, or when it has no policy.
	LastDownscale time.Time
}

// Group is the RolloutGroup that claims the target.
type Group struct {
	Name string
	// RollingTarget is true while the group rolls the target's pods.
	RollingTarget bool
	// Others are the group's members other than the target.
	Others []Member
}

// Input is everything the planner looks at.
type Input struct {
	Now    time.Time
	Paused bool
	// Force, when set, overrides the source.
	Force *int32
	// Target is nil when the StatefulSet does not exist.
	Target *Target
	Source Source
	// UpscaleOnlyWhenLeaderReady holds upscales until the leader is Ready.
	UpscaleOnlyWhenLeaderReady bool
	// ZoneDelay is minTimeBetweenZoneDownscales; 0 means no delay.
	ZoneDelay time.Duration
	// ClaimedBy names the other ScalingPolicies that target the same StatefulSet.
	ClaimedBy []string
	// Group is nil when no RolloutGroup claims the target.
	Group *Group
	// Floor, when set, is how far a DelayedDownscale lets the target shrink
	// now (its pods prepared long enough); FloorSource names it.
	Floor       *int32
	FloorSource string
	// SettledAt is the target's spec.replicas when the policy last recorded
	// it settled (status phase Stable), nil when it has not. A target still
	// at those replicas whose controller counts fewer pods is having a pod
	// replaced (a rollout, an eviction, a crash), not scaling up: the policy
	// stays Stable rather than flip to ScalingUp and back for every pod a
	// rollout replaces (two status writes per pod, and a Ready condition
	// that lies).
	SettledAt *int32
	// Disruption is the answer of the group's one disruption budget
	// (disruption.Decide) to a downscale of the target; nil while not asked.
	// A member of a RolloutGroup is scaled down only on an allowed answer:
	// without one, the plan says what to ask (Plan.AskDisruption).
	Disruption *disruption.Verdict
}

// Plan is the planner's decision.
type Plan struct {
	Phase v1alpha1.ScalingPhase
	// Reason is a ScalingReason* constant naming what happens or is waited for.
	Reason  string
	Message string
	// Current is the target's spec.replicas; Desired what the policy wants.
	Current int32
	Desired *int32
	// Scale, when set, is the spec.replicas to write to the target now.
	Scale *int32
	// WaitingUntil is when a downscale held by the zone delay may go ahead.
	WaitingUntil time.Time
	// RequeueAfter is non-zero when the decision changes with time alone.
	RequeueAfter time.Duration
	// AskDisruption, when set, is the spec.replicas a downscale of a member
	// of a RolloutGroup would write, but for the answer of the group's
	// disruption budget, not asked yet (Input.Disruption nil): the plan
	// waits; the controller asks, and plans again with the answer.
	AskDisruption *int32
}

// Decide decides what to do now. It keeps these rules:
//  1. nothing is scaled while the policy is paused or blocked (target or
//     source missing or unreadable, target claimed by another policy);
//  2. the target is only ever scaled to the desired replicas (forceReplicas,
//     else the source's), so replicas stay between the current and the desired
//     count and never go below 0;
//  3. nothing is scaled while the target's RolloutGroup rolls the target;
//  4. an upscale following a leader with upscaleOnlyWhenLeaderReady waits
//     until every leader replica is Ready;
//  5. a downscale of a member of a RolloutGroup waits until no other member
//     was downscaled within the zone delay, and goes ahead only when the
//     group's disruption budget allows it (no rollout of the group open, no
//     other zone holding the budget or disrupted: Input.Disruption);
//  6. with a DelayedDownscale, a downscale goes no further than its floor: the
//     pods it passes have been prepared for the delay.
func Decide(in Input) Plan {
	var p Plan
	if in.Target == nil {
		return blocked(p, v1alpha1.ScalingReasonTargetNotFound, "blocked: the target StatefulSet does not exist; nothing is scaled")
	}
	p.Current = in.Target.Replicas
	if len(in.ClaimedBy) > 0 {
		return blocked(p, v1alpha1.ScalingReasonTargetClaimedByOtherPolicy, fmt.Sprintf(
			"blocked: StatefulSet %s is also the target of ScalingPolicy %s; a StatefulSet may have one policy only, and none of them scales it",
			in.Target.Name, strings.Join(in.ClaimedBy, ", ")))
	}
	desired, source := in.Source.Replicas, in.Source.Name
	if in.Source.Kind == SourceNone && in.Force == nil {
		p.Phase, p.Reason = v1alpha1.ScalingPhaseStable, v1alpha1.ScalingReasonGuardOnly
		p.Message = fmt.Sprintf("%d replicas; no replica source: the policy only guards downscales", p.Current)
		return p
	}
	if in.Force != nil {
		desired, source = in.Force, "forceReplicas"
	} else if in.Source.Problem != "" {
		return blocked(p, in.Source.ProblemReason, "blocked: "+in.Source.Problem+"; nothing is scaled")
	}
	if desired == nil || *desired < 0 {
		return blocked(p, v1alpha1.ScalingReasonSourceUnreadable, fmt.Sprintf("blocked: %s reports no usable replica count; nothing is scaled", source))
	}
	p.Desired = desired
	want := *desired

	if in.Paused {
		p.Phase, p.Reason = v1alpha1.ScalingPhasePaused, v1alpha1.ScalingReasonPaused
		p.Message = fmt.Sprintf("paused: replicas frozen at %d (%s asks for %d)", p.Current, source, want)
		return p
	}
	if want == p.Current {
		return settled(p, in.Target, in.SettledAt)
	}
	if in.Group != nil && in.Group.RollingTarget {
		return waiting(p, v1alpha1.ScalingReasonRollout, fmt.Sprintf(
			"waiting: RolloutGroup %s is rolling StatefulSet %s; scaling from %d to %d waits for it", in.Group.Name, in.Target.Name, p.Current, want))
	}

	if want > p.Current {
		if in.Source.Kind == SourceLeader && in.Force == nil && in.UpscaleOnlyWhenLeaderReady && !in.Source.LeaderReady {
			return waiting(p, v1alpha1.ScalingReasonLeaderNotReady, fmt.Sprintf(
				"waiting: scaling up from %d to %d once every replica of %s is Ready (upscaleOnlyWhenLeaderReady)", p.Current, want, source))
		}
		p.Scale = &want
		p.Phase, p.Reason = v1alpha1.ScalingPhaseScalingUp, v1alpha1.ScalingReasonScaledUp
		p.Message = fmt.Sprintf("scaled up from %d to %d (%s)", p.Current, want, source)
		return p
	}

	if in.Group != nil {
		if gate := DownscaleGate(in.Now, in.ZoneDelay, in.Group); !gate.Open {
			p = waiting(p, gate.Reason, fmt.Sprintf("waiting: scaling down from %d to %d %s", p.Current, want, gate.Why))
			if !gate.Until.IsZero() {
				p.WaitingUntil = gate.Until
				p.RequeueAfter = gate.Until.Sub(in.Now)
			}
			return p
		}
	}
	to, message := want, fmt.Sprintf("scaled down from %d to %d (%s)", p.Current, want, source)
	if in.Floor != nil && *in.Floor > want {
		if *in.Floor >= p.Current {
			return waiting(p, v1alpha1.ScalingReasonDelayedDownscale, fmt.Sprintf(
				"waiting: scaling down from %d to %d as the pods of DelayedDownscale %s are prepared long enough", p.Current, want, in.FloorSource))
		}
		to = *in.Floor
		message = fmt.Sprintf("scaled down from %d to %d of %d (%s), as far as DelayedDownscale %s allows", p.Current, to, want, source, in.FloorSource)
	}
	if in.Group != nil {
		if wait, ok := disruptionWait(p, in, to); ok {
			return wait
		}
	}
	p.Scale = &to
	p.Phase, p.Reason, p.Message = v1alpha1.ScalingPhaseScalingDown, v1alpha1.ScalingReasonScaledDown, message
	return p
}

// disruptionWait is the plan of a downscale of a member of in.Group to
// replicas to that the group's disruption budget has not allowed: not asked
// yet (the plan says what to ask), or refused (the plan says why, and looks
// again when time alone may change the answer). ok is false when allowed.
func disruptionWait(p Plan, in Input, to int32) (Plan, bool) {
	v := in.Disruption
	switch {
	case v == nil:
		p = waiting(p, v1alpha1.ScalingReasonDisruption, fmt.Sprintf(
			"waiting: scaling down from %d to %d once the disruption budget of RolloutGroup %s allows it", p.Current, to, in.Group.Name))
		p.AskDisruption = &to
		return p, true
	case v.Allowed:
		return p, false
	}
	reason := v1alpha1.ScalingReasonDisruption
	if v.Code == disruption.CodeRolloutInProgress {
		reason = v1alpha1.ScalingReasonRollout
	}
	p = waiting(p, reason, fmt.Sprintf("waiting: scaling down from %d to %d waits for the disruption budget of RolloutGroup %s: %s",
		p.Current, to, in.Group.Name, v.Message))
	p.RequeueAfter = max(v.RetryAfter, 0)
	return p, true
}

// settled is the plan for a target at its desired replicas: Stable, or still
// scaling while its controller adds or removes pods, unless the pods it
// lacks are replacements at replicas already settled (settledAt).
func settled(p Plan, t *Target, settledAt *int32) Plan {
	replacing := settledAt != nil && *settledAt == t.Replicas
	p.Reason = v1alpha1.ScalingReasonAtDesiredReplicas
	switch {
	case t.StatusReplicas > t.Replicas:
		p.Phase = v1alpha1.ScalingPhaseScalingDown
		p.Message = fmt.Sprintf("%d replicas; %d pods above them still leaving", t.Replicas, t.StatusReplicas-t.Replicas)
	case t.StatusReplicas < t.Replicas && !replacing:
		p.Phase = v1alpha1.ScalingPhaseScalingUp
		p.Message = fmt.Sprintf("%d replicas; %d of them created so far", t.Replicas, t.StatusReplicas)
	default:
		p.Phase = v1alpha1.ScalingPhaseStable
		p.Message = fmt.Sprintf("%d replicas, as desired", t.Replicas)
	}
	return p
}

func blocked(p Plan, reason, msg string) Plan {
	p.Phase, p.Reason, p.Message = v1alpha1.ScalingPhaseBlocked, reason, msg
	return p
}

func waiting(p Plan, reason, msg string) Plan {
	p.Phase, p.Reason, p.Message = v1alpha1.ScalingPhaseWaiting, reason, msg
	return p
}

// Gate says whether a downscale of one member of a RolloutGroup may happen now.
type Gate struct {
	Open bool
	// Reason (a ScalingReason* constant) and Why ("once ...", "at ...") say
	// what a closed gate waits for; Until is when a zone delay ends.
	Reason string
	Why    string
	Until  time.Time
}

// recordLead is how far a member's recorded downscale time may precede the
// downscale itself. A downscale is recorded before its patch is sent, so that a
// crash cannot lose it, and the time the patch returned is written after it;
// when the operator dies between the two, only the earlier record remains, a
// round trip before the API server applied the patch. The zone delay counts
// from a second after the record, so the zones stay at least the delay apart as
// the API server saw them.
const recordLead = time.Second

// DownscaleGate is the zone delay both the ScalingPolicy controller and the
// prepare-downscale webhook apply to a downscale of a member of group: no
// other member was downscaled within zoneDelay. Whether the other members
// are whole is the group's disruption budget's to say (Input.Disruption),
// on their pods rather than their StatefulSets' status.
func DownscaleGate(now time.Time, zoneDelay time.Duration, group *Group) Gate {
	if group == nil {
		return Gate{Open: true}
	}
	if last, who := lastDownscale(group.Others); zoneDelay > 0 && !last.IsZero() && now.Before(last.Add(zoneDelay+recordLead)) {
		until := last.Add(zoneDelay + recordLead)
		return Gate{Reason: v1alpha1.ScalingReasonZoneDelay, Until: until, Why: fmt.Sprintf(
			"at %s, %s after StatefulSet %s was downscaled (minTimeBetweenZoneDownscales)",
			until.UTC().Format(time.RFC3339), zoneDelay, who)}
	}
	return Gate{Open: true}
}

// lastDownscale is the latest downscale among the members, and whose.
func lastDownscale(members []Member) (time.Time, string) {
	var last time.Time
	var who string
	for _, m := range members {
		if m.LastDownscale.After(last) {
			last, who = m.LastDownscale, m.Name
		}
	}
	return last, who
}
