package hooks

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// FuzzWithin: whatever a spec sets, an eviction's call fits the admission
// budget, and shortening never adds retries or lengthens the timeout.
func FuzzWithin(f *testing.F) {
	f.Add(int64(5*time.Second), 2, int64(EvictionBudget))
	f.Add(int64(30*time.Second), 5, int64(time.Second))
	f.Add(int64(time.Millisecond), 0, int64(time.Millisecond))
	f.Fuzz(func(t *testing.T, timeout int64, retries int, budget int64) {
		if timeout <= 0 || budget <= 0 || retries < 0 || retries > MaxRetries || timeout > int64(MaxTimeout) || budget > int64(time.Minute) {
			t.Skip()
		}
		in := Settings{Timeout: time.Duration(timeout), Retries: retries}
		out := Within(in, time.Duration(budget))
		if WorstCase(out) > time.Duration(budget) {
			t.Fatalf("Within(%+v, %v) = %+v takes up to %v", in, time.Duration(budget), out, WorstCase(out))
		}
		if out.Retries > in.Retries || out.Timeout > in.Timeout || out.Timeout <= 0 {
			t.Fatalf("Within(%+v) = %+v", in, out)
		}
	})
}

// FuzzDecide: every pod is judged once; under Fail exactly the failed pods
// are held, under Ignore none is.
func FuzzDecide(f *testing.F) {
	f.Add(uint16(0b1011), uint8(4), true)
	f.Fuzz(func(t *testing.T, failedMask uint16, n uint8, fail bool) {
		n %= 16
		var keys []string
		errs := map[string]error{}
		for i := range int(n) {
			k := fmt.Sprintf("p-%d", i)
			keys = append(keys, k)
			if failedMask&(1<<i) != 0 {
				errs[k] = errors.New("refused")
			}
		}
		policy := v1alpha1.HookIgnore
		if fail {
			policy = v1alpha1.HookFail
		}
		v := Decide(policy, keys, errs)
		if len(v.Proceed)+len(v.Held) != len(keys) {
			t.Fatalf("%d proceed + %d held for %d pods", len(v.Proceed), len(v.Held), len(keys))
		}
		for _, k := range v.Proceed {
			if _, held := v.Held[k]; held {
				t.Fatalf("%s both proceeds and is held", k)
			}
			if fail && errs[k] != nil {
				t.Fatalf("%s failed under Fail and proceeds", k)
			}
		}
		if !fail && len(v.Held) > 0 {
			t.Fatalf("held %v under Ignore", v.Held)
		}
	})
}
