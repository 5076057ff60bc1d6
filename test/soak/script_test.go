package soak

import (
	"reflect"
	"testing"
)

func config(seed uint64) Config {
	return Config{Seed: seed, Rollouts: 200, Groups: 4, PodsPerRollout: 12, APIServerRestarts: 1, Handovers: true,
		Evictions: true, Drains: true, Nodes: 6, Replicas: 4}
}

// The same seed draws the same scripts; another seed others.
func TestGenerateIsReproducibleFromTheSeed(t *testing.T) {
	a, b := Generate(config(42)), Generate(config(42))
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("seed 42 drew different scripts twice:\n%v\n%v", a[:3], b[:3])
	}
	if c := Generate(config(43)); reflect.DeepEqual(a, c) {
		t.Fatalf("seeds 42 and 43 drew the same scripts")
	}
}

// Over a run's draws every kind of action and every outcome comes up, the
// API server restarts as often as asked, every step lands mid-rollout and
// the scripts share the groups out evenly.
func TestGenerateCoversEveryKind(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 42, 1234567} {
		scripts := Generate(config(seed))
		if len(scripts) != 200 {
			t.Fatalf("seed %d: %d scripts, want 200", seed, len(scripts))
		}
		kinds, outcomes, perGroup := map[Kind]int{}, map[Outcome]int{}, map[int]int{}
		for i, s := range scripts {
			if s.Index != i {
				t.Errorf("seed %d: script %d has index %d", seed, i, s.Index)
			}
			perGroup[s.Group]++
			outcomes[s.Expect()]++
			for j, st := range s.Steps {
				kinds[st.Kind]++
				if st.AfterRolls < 0 || st.AfterRolls > 6 {
					t.Errorf("seed %d: %s: step %s lands after %d of 12 pods, not mid-rollout", seed, s, st, st.AfterRolls)
				}
				if st.Zone < 0 || st.Zone > 2 || st.Pod < 0 || st.Pod >= 4 || st.Node < 0 || st.Node >= 6 {
					t.Errorf("seed %d: %s: step %s draws a zone, pod or node that does not exist", seed, s, st)
				}
				if j > 0 && st.AfterRolls < s.Steps[j-1].AfterRolls {
					t.Errorf("seed %d: %s: steps out of order", seed, s)
				}
			}
		}
		for _, k := range Kinds {
			if kinds[k] == 0 {
				t.Errorf("seed %d: no %s in 200 scripts: %v", seed, k, kinds)
			}
		}
		if kinds[RestartAPIServer] != 1 {
			t.Errorf("seed %d: %d API server restarts, want 1", seed, kinds[RestartAPIServer])
		}
		for _, o := range Outcomes {
			if outcomes[o] == 0 {
				t.Errorf("seed %d: no script expects %s: %v", seed, o, outcomes)
			}
		}
		for g := range 4 {
			if perGroup[g] != 50 {
				t.Errorf("seed %d: group %d has %d scripts, want 50", seed, g, perGroup[g])
			}
		}
	}
}

// Without handovers no script hands over; without restarts none restarts.
func TestGenerateLeavesOutWhatIsTurnedOff(t *testing.T) {
	c := config(7)
	c.Handovers, c.APIServerRestarts, c.Evictions = false, 0, false
	for _, s := range Generate(c) {
		if s.Has(Kill) || s.Has(Term) || s.Has(RestartAPIServer) || s.Has(Evict) || s.Has(Drain) {
			t.Fatalf("%s: chaos that is turned off", s)
		}
	}
}

func TestExpect(t *testing.T) {
	tests := []struct {
		steps       []Step
		want        Outcome
		wantReverts bool
	}{
		{nil, Complete, false},
		{[]Step{{Kind: Flip, AfterRolls: 2}}, Complete, false},
		{[]Step{{Kind: Revert, AfterRolls: 2}}, Complete, true},
		{[]Step{{Kind: CrashLoop}, {Kind: Revert}}, Complete, true},
		{[]Step{{Kind: CrashLoopRollback}}, RolledBack, true},
		{[]Step{{Kind: GateFail}, {Kind: Kill, AfterRolls: 3}}, RolledBack, true},
		{[]Step{{Kind: Scale, AfterRolls: 1, Delta: -2}}, Complete, false},
		{[]Step{{Kind: Term, AfterRolls: 1}, {Kind: Pause, AfterRolls: 3}}, Paused, false},
		{[]Step{{Kind: RestartAPIServer, AfterRolls: 4}}, Complete, false},
		{[]Step{{Kind: Evict, AfterRolls: 1}, {Kind: Drain, AfterRolls: 2}}, Complete, false},
		{[]Step{{Kind: CrashLoopRollback}, {Kind: Drain, AfterRolls: 2}}, RolledBack, true},
	}
	for _, tt := range tests {
		s := Script{Steps: tt.steps}
		if got := s.Expect(); got != tt.want {
			t.Errorf("%s: Expect() = %s, want %s", s, got, tt.want)
		}
		if got := s.Reverts(); got != tt.wantReverts {
			t.Errorf("%s: Reverts() = %v, want %v", s, got, tt.wantReverts)
		}
	}
}

// Steps of a paused script land with the pause at the latest, the pause
// first of those at its moment: nothing rolls after it, and a handover must
// not hold it up until the rollout has ended.
func TestOrderHoldsStepsBeforeAPause(t *testing.T) {
	s := Script{Steps: []Step{{Kind: Pause, AfterRolls: 2}, {Kind: Kill, AfterRolls: 5}, {Kind: RestartAPIServer, AfterRolls: 1}}}
	s.order()
	want := []Step{{Kind: RestartAPIServer, AfterRolls: 1}, {Kind: Pause, AfterRolls: 2}, {Kind: Kill, AfterRolls: 2}}
	if !reflect.DeepEqual(s.Steps, want) {
		t.Errorf("order = %v, want %v", s.Steps, want)
	}
}
