package scaling

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"github.com/echelon-operator/echelon/internal/disruption"
	"github.com/echelon-operator/echelon/internal/fuzzinput"
)

// FuzzDecide builds random policies and checks every plan against rules
// written here independently of the planner: replicas only ever move to the
// desired count, between the current and the source's count, never below 0; a
// downscale of a member of a group is never issued inside the zone delay,
// without an allowed answer of the group's disruption budget, while the group
// rolls the target, or while paused or blocked; and what a plan asks the
// budget about is exactly the downscale an allowed answer then makes.
func FuzzDecide(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{5, 3, 1, 0, 0, 0, 0, 0, 0, 0, 0})
	rng := rand.New(rand.NewPCG(3, 4))
	for range 300 {
		seed := make([]byte, 8+rng.IntN(40))
		for i := range seed {
			seed[i] = byte(rng.UintN(256))
		}
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		b := fuzzinput.New(data)
		in := generate(b)
		p := Decide(in)
		if err := check(in, p); err != nil {
			t.Fatalf("%v\ninput: %s\nplan: %+v scale=%v", err, describe(in), p, ptrString(p.Scale))
		}
		if err := checkAsk(in, p); err != nil {
			t.Fatalf("%v\ninput: %s\nplan: %+v scale=%v ask=%v", err, describe(in), p, ptrString(p.Scale), ptrString(p.AskDisruption))
		}
	})
}

func generate(b *fuzzinput.Bytes) Input {
	in := Input{Now: now, Paused: b.Rare(8), UpscaleOnlyWhenLeaderReady: b.Intn(2) == 1}
	in.ZoneDelay = []time.Duration{0, time.Minute, time.Hour, 12 * time.Hour}[b.Intn(4)]
	if !b.Rare(16) {
		cur := int32(b.Intn(12))
		in.Target = &Target{Name: "zone-b", Replicas: cur, StatusReplicas: cur + int32(b.Intn(3)) - 1, ReadyReplicas: cur}
	}
	in.Source = Source{Kind: []SourceKind{SourceLeader, SourceResource, SourceSelf}[b.Intn(3)], Name: "the source", LeaderReady: b.Intn(2) == 1}
	switch b.Intn(10) {
	case 8:
		in.Source.Problem, in.Source.ProblemReason = "the source does not exist", "SourceNotFound"
	case 9:
		in.Source.Replicas = ptr.To(int32(-1 - b.Intn(3)))
	default:
		in.Source.Replicas = ptr.To(int32(b.Intn(12)))
	}
	if b.Rare(6) {
		in.Force = ptr.To(int32(b.Intn(12)))
	}
	if b.Rare(16) {
		in.ClaimedBy = []string{"other"}
	}
	if b.Rare(4) {
		in.Floor, in.FloorSource = ptr.To(int32(b.Intn(12))), "dd"
	}
	if !b.Rare(4) {
		g := &Group{Name: "ingester", RollingTarget: b.Rare(6)}
		for i := range b.Intn(4) {
			m := Member{Name: fmt.Sprintf("zone-%c", 'c'+i)}
			if b.Intn(2) == 1 {
				m.LastDownscale = now.Add(-time.Duration(b.Intn(48)) * 30 * time.Minute)
			}
			g.Others = append(g.Others, m)
		}
		in.Group = g
	}
	switch b.Intn(4) {
	case 0:
	case 1:
		code := []string{disruption.CodeRolloutInProgress, disruption.CodeHeldByOtherZone, disruption.CodeOtherZoneDisrupted}[b.Intn(3)]
		in.Disruption = &disruption.Verdict{Code: code, Message: "refused", RetryAfter: time.Duration(b.Intn(3)) * 10 * time.Second}
	default:
		in.Disruption = &disruption.Verdict{Allowed: true}
	}
	return in
}

func describe(in Input) string {
	s := fmt.Sprintf("paused=%v force=%s delay=%s upscaleOnlyWhenLeaderReady=%v claimedBy=%v source=%+v replicas=%s",
		in.Paused, ptrString(in.Force), in.ZoneDelay, in.UpscaleOnlyWhenLeaderReady, in.ClaimedBy, in.Source, ptrString(in.Source.Replicas))
	if in.Target != nil {
		s += fmt.Sprintf(" target=%+v", *in.Target)
	}
	if in.Group != nil {
		s += fmt.Sprintf(" group=%+v", *in.Group)
	}
	if in.Disruption != nil {
		s += fmt.Sprintf(" disruption=%+v", *in.Disruption)
	}
	return s
}

func check(in Input, p Plan) error {
	if p.RequeueAfter < 0 {
		return fmt.Errorf("negative RequeueAfter")
	}
	if p.Scale == nil {
		return nil
	}
	scale := *p.Scale
	switch {
	case in.Target == nil:
		return fmt.Errorf("scales a missing target")
	case in.Paused:
		return fmt.Errorf("scales while paused")
	case len(in.ClaimedBy) > 0:
		return fmt.Errorf("scales a target claimed by another policy")
	case in.Group != nil && in.Group.RollingTarget:
		return fmt.Errorf("scales while the group rolls the target")
	case scale < 0:
		return fmt.Errorf("scales to %d", scale)
	}
	want := in.Source.Replicas
	if in.Force != nil {
		want = in.Force
	} else if in.Source.Problem != "" {
		return fmt.Errorf("scales on a source with a problem")
	}
	cur := in.Target.Replicas
	if want == nil {
		return fmt.Errorf("scales to %d with no desired count", scale)
	}
	if floor := in.Floor; floor != nil && scale < cur {
		if scale < *floor {
			return fmt.Errorf("scales down to %d, below the DelayedDownscale floor %d", scale, *floor)
		}
		if scale != max(*want, *floor) {
			return fmt.Errorf("scales down to %d, want max(desired %d, floor %d)", scale, *want, *floor)
		}
	} else if scale != *want {
		return fmt.Errorf("scales to %d, want the desired %s", scale, ptrString(want))
	}
	if scale == cur {
		return fmt.Errorf("patches the target to the replicas it has")
	}
	if scale > cur && in.Force == nil && in.Source.Kind == SourceLeader && in.UpscaleOnlyWhenLeaderReady && !in.Source.LeaderReady {
		return fmt.Errorf("upscales while the leader is not Ready")
	}
	if scale < cur && in.Group != nil {
		if in.Disruption == nil || !in.Disruption.Allowed {
			return fmt.Errorf("downscales a member of a group without an allowed answer of its disruption budget")
		}
		for _, m := range in.Group.Others {
			if in.ZoneDelay > 0 && !m.LastDownscale.IsZero() && now.Sub(m.LastDownscale) < in.ZoneDelay {
				return fmt.Errorf("downscales %s after %s's downscale, inside the zone delay %s", now.Sub(m.LastDownscale), m.Name, in.ZoneDelay)
			}
		}
	}
	return nil
}

// checkAsk: a plan asks the disruption budget only about a downscale of a
// member of a group it has not asked yet, and only about the downscale an
// allowed answer then makes; a plan that an allowed answer lets downscale
// asks about it when not asked.
func checkAsk(in Input, p Plan) error {
	asked := in
	asked.Disruption = &disruption.Verdict{Allowed: true}
	allowed := Decide(asked)
	unasked := in
	unasked.Disruption = nil
	ask := Decide(unasked).AskDisruption
	switch {
	case p.AskDisruption != nil && (in.Disruption != nil || in.Group == nil || p.Scale != nil):
		return fmt.Errorf("asks the disruption budget with an answer, without a group, or while scaling")
	case in.Group == nil:
		return nil
	case allowed.Scale != nil && *allowed.Scale < allowed.Current && (ask == nil || *ask != *allowed.Scale):
		return fmt.Errorf("an allowed answer downscales to %d, but the plan not asked asks about %s", *allowed.Scale, ptrString(ask))
	case ask != nil && (allowed.Scale == nil || *allowed.Scale != *ask):
		return fmt.Errorf("asks about a downscale to %d, but an allowed answer scales to %s", *ask, ptrString(allowed.Scale))
	}
	return nil
}
