package notify

import (
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

func spStatus(phase v1alpha1.ScalingPhase, reason string, replicas, desired int32) v1alpha1.ScalingPolicyStatus {
	return v1alpha1.ScalingPolicyStatus{Phase: phase, Replicas: replicas, DesiredReplicas: ptr(desired),
		Conditions: []metav1.Condition{{Type: v1alpha1.ScalingConditionReady, Reason: reason}}}
}

func ddStatus(phase v1alpha1.DelayedDownscalePhase, reason string, replicas, desired int32) v1alpha1.DelayedDownscaleStatus {
	return v1alpha1.DelayedDownscaleStatus{Phase: phase, Replicas: replicas, DesiredReplicas: ptr(desired),
		Conditions: []metav1.Condition{{Type: v1alpha1.DelayedConditionReady, Reason: reason}}}
}

// describe lists events as Type from→to, with the pods listed.
func describe(evs []v1alpha1.NotificationEvent) []string {
	var out []string
	for _, ev := range evs {
		s := string(ev.Type)
		if ev.FromReplicas != nil && ev.ToReplicas != nil {
			s += fmt.Sprintf(" %d→%d", *ev.FromReplicas, *ev.ToReplicas)
		}
		if ev.Replicas > 0 {
			pods := PagePods(ev, 1)
			s += fmt.Sprintf(" [%s..%s]", pods[0], pods[len(pods)-1])
		}
		out = append(out, s)
	}
	return out
}

// The events of a ScalingPolicy, derived from the statuses the notifier
// sees one after the other.
func TestDeriveScaling(t *testing.T) {
	stable := func(n int32) v1alpha1.ScalingPolicyStatus {
		return spStatus(v1alpha1.ScalingPhaseStable, v1alpha1.ScalingReasonAtDesiredReplicas, n, n)
	}
	tests := []struct {
		name string
		seen []v1alpha1.ScalingPolicyStatus
		want []string
	}{{
		name: "the first status is the baseline",
		seen: []v1alpha1.ScalingPolicyStatus{{}, stable(3)},
	}, {
		name: "a follower scaled up with its leader",
		seen: []v1alpha1.ScalingPolicyStatus{stable(3), spStatus(v1alpha1.ScalingPhaseScalingUp, v1alpha1.ScalingReasonScaledUp, 5, 5), stable(5), stable(5)},
		want: []string{"Scaled 3→5"},
	}, {
		name: "a downscale held by the zone delay, then made",
		seen: []v1alpha1.ScalingPolicyStatus{stable(5), spStatus(v1alpha1.ScalingPhaseWaiting, v1alpha1.ScalingReasonZoneDelay, 5, 3),
			spStatus(v1alpha1.ScalingPhaseWaiting, v1alpha1.ScalingReasonZoneDelay, 5, 3), spStatus(v1alpha1.ScalingPhaseScalingDown, v1alpha1.ScalingReasonScaledDown, 3, 3)},
		want: []string{"ScaleHeld 5→3", "Scaled 5→3"},
	}, {
		name: "held for another reason is news again",
		seen: []v1alpha1.ScalingPolicyStatus{stable(5), spStatus(v1alpha1.ScalingPhaseWaiting, v1alpha1.ScalingReasonZoneDelay, 5, 3),
			spStatus(v1alpha1.ScalingPhaseWaiting, v1alpha1.ScalingReasonRollout, 5, 3)},
		want: []string{"ScaleHeld 5→3", "ScaleHeld 5→3"},
	}, {
		name: "a missing leader blocks the policy",
		seen: []v1alpha1.ScalingPolicyStatus{stable(5), spStatus(v1alpha1.ScalingPhaseBlocked, v1alpha1.ScalingReasonSourceNotFound, 5, 5),
			spStatus(v1alpha1.ScalingPhaseBlocked, v1alpha1.ScalingReasonSourceNotFound, 5, 5), stable(5)},
		want: []string{"ScaleFailed"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ns v1alpha1.NotificationStatus
			for i, st := range tt.seen {
				ns = DeriveScaling(ns, st, "zone-b", "zone-a", true, testTime.Add(time.Duration(i)*time.Second))
			}
			if got := describe(ns.Events); !slices.Equal(got, tt.want) {
				t.Fatalf("events %v, want %v", got, tt.want)
			}
			for _, ev := range ns.Events {
				if ev.Type == v1alpha1.NotificationScaled && (ev.Leader != "zone-a" || ev.Member != "zone-b") {
					t.Errorf("Scaled names leader %q target %q", ev.Leader, ev.Member)
				}
			}
		})
	}
}

// The events of a DelayedDownscale.
func TestDeriveDelayed(t *testing.T) {
	idle := func(n int32) v1alpha1.DelayedDownscaleStatus {
		return ddStatus(v1alpha1.DelayedPhaseIdle, v1alpha1.DelayedReasonIdle, n, n)
	}
	preparing := ddStatus(v1alpha1.DelayedPhasePreparing, v1alpha1.DelayedReasonPreparing, 120, 10)
	waiting := ddStatus(v1alpha1.DelayedPhaseWaiting, v1alpha1.DelayedReasonWaiting, 120, 10)
	eligible := ddStatus(v1alpha1.DelayedPhaseScalingDown, v1alpha1.DelayedReasonEligible, 120, 10)
	podErrors := ddStatus(v1alpha1.DelayedPhaseBlocked, v1alpha1.DelayedReasonPodErrors, 120, 10)
	tests := []struct {
		name string
		seen []v1alpha1.DelayedDownscaleStatus
		want []string
	}{{
		name: "delayed, then done",
		seen: []v1alpha1.DelayedDownscaleStatus{idle(120), preparing, waiting, waiting, eligible, idle(10)},
		want: []string{"DownscaleRequested 120→10 [ingester-10..ingester-59]", "DownscaleDelayed 120→10", "DownscaleDone 120→10"},
	}, {
		name: "prepared within one pass: requested and delayed at once",
		seen: []v1alpha1.DelayedDownscaleStatus{idle(120), waiting, idle(10)},
		want: []string{"DownscaleRequested 120→10 [ingester-10..ingester-59]", "DownscaleDelayed 120→10", "DownscaleDone 120→10"},
	}, {
		name: "done in two steps",
		seen: []v1alpha1.DelayedDownscaleStatus{idle(120), waiting, ddStatus(v1alpha1.DelayedPhaseWaiting, v1alpha1.DelayedReasonWaiting, 60, 10), idle(10)},
		want: []string{"DownscaleRequested 120→10 [ingester-10..ingester-59]", "DownscaleDelayed 120→10", "DownscaleDone 120→60", "DownscaleDone 60→10"},
	}, {
		name: "cancelled: the leader scaled back up",
		seen: []v1alpha1.DelayedDownscaleStatus{idle(120), waiting, idle(120)},
		want: []string{"DownscaleRequested 120→10 [ingester-10..ingester-59]", "DownscaleDelayed 120→10", "DownscaleCancelled 120→120"},
	}, {
		name: "a pod's prepare call failing holds it, once",
		seen: []v1alpha1.DelayedDownscaleStatus{idle(120), preparing, podErrors, podErrors, waiting},
		want: []string{"DownscaleRequested 120→10 [ingester-10..ingester-59]", "DownscaleFailed 120→10", "DownscaleDelayed 120→10"},
	}, {
		name: "a downscale reaching further asks the further pods",
		seen: []v1alpha1.DelayedDownscaleStatus{idle(120), waiting, ddStatus(v1alpha1.DelayedPhasePreparing, v1alpha1.DelayedReasonPreparing, 120, 5)},
		want: []string{"DownscaleRequested 120→10 [ingester-10..ingester-59]", "DownscaleDelayed 120→10", "DownscaleRequested 120→5 [ingester-5..ingester-54]"},
	}, {
		name: "a downscale pending before the receivers came is the baseline",
		seen: []v1alpha1.DelayedDownscaleStatus{waiting, waiting, idle(10)},
		want: []string{"DownscaleDone 120→10"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ns v1alpha1.NotificationStatus
			for i, st := range tt.seen {
				ns = DeriveDelayed(ns, st, "ingester", true, testTime.Add(time.Duration(i)*time.Second))
			}
			if got := describe(ns.Events); !slices.Equal(got, tt.want) {
				t.Fatalf("events %v, want %v", got, tt.want)
			}
			if ev := ns.Events[0]; ev.Type == v1alpha1.NotificationDownscaleRequested && Pages(ev) != 3 {
				t.Errorf("110 pods in %d pages, want 3", Pages(ev))
			}
		})
	}
}

// Whatever statuses of a ScalingPolicy or DelayedDownscale the notifier
// sees, in whatever order: sequences grow by one an event, the same status
// seen again derives nothing, every Scaled and DownscaleDone names a real
// change, and every page of a DownscaleRequested lists pods the downscale
// removes.
func FuzzDeriveScaling(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3}, true)
	f.Add([]byte{0, 5, 6, 7, 0}, false)
	f.Fuzz(func(t *testing.T, seq []byte, delayed bool) {
		phasesSP := []v1alpha1.ScalingPhase{"", v1alpha1.ScalingPhaseStable, v1alpha1.ScalingPhaseWaiting, v1alpha1.ScalingPhaseBlocked, v1alpha1.ScalingPhaseScalingUp}
		phasesDD := []v1alpha1.DelayedDownscalePhase{"", v1alpha1.DelayedPhaseIdle, v1alpha1.DelayedPhasePreparing, v1alpha1.DelayedPhaseWaiting, v1alpha1.DelayedPhaseScalingDown, v1alpha1.DelayedPhaseBlocked}
		reasons := []string{"A", "B"}
		var ns v1alpha1.NotificationStatus
		for i, b := range seq {
			replicas, desired := int32(b%7)*30, int32(b/7%7)*30
			reason := reasons[int(b>>6)%2]
			now := testTime.Add(time.Duration(i) * time.Second)
			derive := func(prev v1alpha1.NotificationStatus) v1alpha1.NotificationStatus {
				if delayed {
					return DeriveDelayed(prev, ddStatus(phasesDD[int(b)%len(phasesDD)], reason, replicas, desired), "t", true, now)
				}
				return DeriveScaling(prev, spStatus(phasesSP[int(b)%len(phasesSP)], reason, replicas, desired), "t", "l", true, now)
			}
			next := derive(ns)
			if again := derive(next); again.Sequence != next.Sequence {
				t.Fatalf("the same status derived %d more events", again.Sequence-next.Sequence)
			}
			if added := int64(len(next.Events) - len(ns.Events)); len(next.Events) > MaxEvents || (len(next.Events) < MaxEvents && added != next.Sequence-ns.Sequence) {
				t.Fatalf("%d events kept, %d added, sequence %d to %d", len(next.Events), added, ns.Sequence, next.Sequence)
			}
			for _, ev := range next.Events[min(len(ns.Events), len(next.Events)):] {
				switch ev.Type {
				case v1alpha1.NotificationScaled, v1alpha1.NotificationDownscaleDone:
					if *ev.FromReplicas == *ev.ToReplicas || (ev.Type == v1alpha1.NotificationDownscaleDone && *ev.ToReplicas > *ev.FromReplicas) {
						t.Fatalf("%s %d→%d", ev.Type, *ev.FromReplicas, *ev.ToReplicas)
					}
				case v1alpha1.NotificationDownscaleRequested:
					for p := int32(1); p <= Pages(ev); p++ {
						pods := PagePods(ev, p)
						if len(pods) == 0 || len(pods) > PageSize {
							t.Fatalf("page %d of %d lists %d pods", p, Pages(ev), len(pods))
						}
						for _, pod := range pods {
							var ord int32
							if _, err := fmt.Sscanf(pod, "t-%d", &ord); err != nil || ord < *ev.ToReplicas || ord >= *ev.FromReplicas {
								t.Fatalf("pod %s is not removed by the downscale %d→%d", pod, *ev.FromReplicas, *ev.ToReplicas)
							}
						}
					}
				}
			}
			ns = next
			if len(ns.Events) >= MaxEvents {
				ns.Events = nil
			}
		}
	})
}
