package podname

import "testing"

func TestRemoved(t *testing.T) {
	for _, tc := range []struct {
		start, from, to int32
		lo, hi          int
	}{
		{start: 0, from: 5, to: 2, lo: 2, hi: 5},
		{start: 1, from: 5, to: 2, lo: 3, hi: 6}, // pods 1..5 keep 1 and 2
		{start: 10, from: 3, to: 0, lo: 10, hi: 13},
		{start: 1, from: 2, to: 4, lo: 3, hi: 3}, // an upscale removes nothing
	} {
		if lo, hi := Removed(tc.start, tc.from, tc.to); lo != tc.lo || hi != tc.hi {
			t.Errorf("Removed(%d, %d, %d) = [%d, %d), want [%d, %d)", tc.start, tc.from, tc.to, lo, hi, tc.lo, tc.hi)
		}
	}
}
