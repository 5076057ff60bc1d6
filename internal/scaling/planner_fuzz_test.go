package scaling

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"k8s.io/utils/ptr"
)

// FuzzDecide builds random policies and checks every plan against rules
// written here independently of the planner: replicas only ever move to the
// desired count, between the current and the source's count, never below 0; a
// downscale is never issued inside the zone delay, while another member is not
// Ready, while the group rolls the target, or while paused or blocked.
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
		b := &bytesSource{data: data}
		in := generate(b)
		p := Decide(in)
		if err := check(in, p); err != nil {
			t.Fatalf("%v\ninput: %s\nplan: %+v scale=%v", err, describe(in), p, ptrString(p.Scale))
		}
	})
}

type bytesSource struct {
	data []byte
	pos  int
}

func (b *bytesSource) next() byte {
	if b.pos >= len(b.data) {
		return 0
	}
	v := b.data[b.pos]
	b.pos++
	return v
}

func (b *bytesSource) intn(n int) int  { return int(b.next()) % n }
func (b *bytesSource) rare(n int) bool { return b.intn(n) == n-1 }

func generate(b *bytesSource) Input {
	in := Input{Now: now, Paused: b.rare(8), UpscaleOnlyWhenLeaderReady: b.intn(2) == 1}
	in.ZoneDelay = []time.Duration{0, time.Minute, time.Hour, 12 * time.Hour}[b.intn(4)]
	if !b.rare(16) {
		cur := int32(b.intn(12))
		in.Target = &Target{Name: "zone-b", Replicas: cur, StatusReplicas: cur + int32(b.intn(3)) - 1, ReadyReplicas: cur}
	}
	in.Source = Source{Kind: []SourceKind{SourceLeader, SourceResource, SourceSelf}[b.intn(3)], Name: "the source", LeaderReady: b.intn(2) == 1}
	switch b.intn(10) {
	case 8:
		in.Source.Problem, in.Source.ProblemReason = "the source does not exist", "SourceNotFound"
	case 9:
		in.Source.Replicas = ptr.To(int32(-1 - b.intn(3)))
	default:
		in.Source.Replicas = ptr.To(int32(b.intn(12)))
	}
	if b.rare(6) {
		in.Force = ptr.To(int32(b.intn(12)))
	}
	if b.rare(16) {
		in.ClaimedBy = []string{"other"}
	}
	if !b.rare(4) {
		g := &Group{Name: "ingester", RollingTarget: b.rare(6)}
		for i := range b.intn(4) {
			m := Member{Name: fmt.Sprintf("zone-%c", 'c'+i), Ready: !b.rare(5)}
			if b.intn(2) == 1 {
				m.LastDownscale = now.Add(-time.Duration(b.intn(48)) * 30 * time.Minute)
			}
			g.Others = append(g.Others, m)
		}
		in.Group = g
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
	if want == nil || scale != *want {
		return fmt.Errorf("scales to %d, want the desired %s", scale, ptrString(want))
	}
	cur := in.Target.Replicas
	if scale == cur {
		return fmt.Errorf("patches the target to the replicas it has")
	}
	if scale > cur && in.Force == nil && in.Source.Kind == SourceLeader && in.UpscaleOnlyWhenLeaderReady && !in.Source.LeaderReady {
		return fmt.Errorf("upscales while the leader is not Ready")
	}
	if scale < cur && in.Group != nil {
		for _, m := range in.Group.Others {
			if !m.Ready {
				return fmt.Errorf("downscales while %s is not Ready", m.Name)
			}
			if in.ZoneDelay > 0 && !m.LastDownscale.IsZero() && now.Sub(m.LastDownscale) < in.ZoneDelay {
				return fmt.Errorf("downscales %s after %s's downscale, inside the zone delay %s", now.Sub(m.LastDownscale), m.Name, in.ZoneDelay)
			}
		}
	}
	return nil
}
