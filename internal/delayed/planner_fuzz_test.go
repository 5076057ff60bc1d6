package delayed

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/echelon-operator/echelon/internal/fuzzinput"
)

// FuzzDecide checks, with rules written here independently of the planner,
// that the replicas it allows are never below desired, never above current,
// and never pass a pod that is not prepared for the delay (with every pod above
// it prepared too).
func FuzzDecide(f *testing.F) {
	f.Add([]byte{})
	rng := rand.New(rand.NewPCG(5, 6))
	for range 300 {
		seed := make([]byte, 8+rng.IntN(60))
		for i := range seed {
			seed[i] = byte(rng.UintN(256))
		}
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		b := fuzzinput.New(data)
		current := int32(b.Intn(10))
		in := sts(int32(b.Intn(10)), current)
		if b.Rare(8) {
			in.Desired = nil
		}
		for name, pod := range in.Pods {
			switch b.Intn(16) {
			case 14:
				delete(in.Pods, name)
			case 15:
				pod.AddressError = "no IP"
				in.Pods[name] = pod
			}
		}
		answers := map[string]Record{}
		for ord := range int(current) {
			name := fmt.Sprintf("ing-%d", ord)
			r := Record{Name: name}
			switch b.Intn(8) {
			case 0:
				continue // not called
			case 1:
				r.Err = "answered 500"
			case 2:
				r.PreparedAt = now.Add(time.Duration(b.Intn(120)) * time.Minute) // future
			default:
				r.PreparedAt = now.Add(-time.Duration(b.Intn(6*60)) * time.Minute)
			}
			if b.Intn(2) == 0 {
				answers[name] = r
			} else {
				in.Previous = append(in.Previous, r)
			}
		}
		for _, name := range Calls(in).Cancel {
			if ord := in.Pods[name].Ordinal; in.Desired != nil && ord >= int(*in.Desired) && ord < int(in.Current) {
				t.Fatalf("cancels %s, a pod the downscale from %d to %d removes", name, in.Current, *in.Desired)
			}
		}
		p := Decide(in, answers)
		if p.RequeueAfter < 0 {
			t.Fatalf("negative RequeueAfter %s", p.RequeueAfter)
		}
		if p.Eligible == nil {
			if in.Desired != nil && *in.Desired < in.Current {
				t.Fatalf("a pending downscale reports nothing eligible")
			}
			return
		}
		e := *p.Eligible
		if e < *in.Desired || e > in.Current {
			t.Fatalf("eligible %d outside [desired %d, current %d]", e, *in.Desired, in.Current)
		}
		// Every pod the shrink passes was answered or recorded as prepared
		// long enough, exists and is addressable.
		known := map[string]Record{}
		for _, r := range in.Previous {
			known[r.Name] = r
		}
		for n, r := range answers {
			known[n] = r
		}
		for ord := e; ord < in.Current; ord++ {
			name := fmt.Sprintf("ing-%d", ord)
			r, ok := known[name]
			pod, exists := in.Pods[name]
			switch {
			case !ok || r.Err != "" || r.PreparedAt.IsZero():
				t.Fatalf("shrinks to %d past %s, which is not prepared (%+v)", e, name, r)
			case !exists || pod.AddressError != "":
				t.Fatalf("shrinks to %d past %s, which is missing or unaddressable", e, name)
			case now.Sub(r.PreparedAt) < delay:
				t.Fatalf("shrinks to %d past %s, prepared only %s ago", e, name, now.Sub(r.PreparedAt))
			}
		}
	})
}
