// Package soak runs many randomized rollouts on several RolloutGroups at once
// against a real control plane, with the faults production brings (template
// flips, reverts, releases whose pods never become Ready, scale changes,
// failing analysis gates, operator handovers, an API server restart, API
// throttling), while the e2e pod monitor judges the guarantees at every pod
// event; and prints what happened as a table.
//
// What each rollout does is a Script drawn from a seeded random source:
// Generate is a pure function of its Config, so a seed reproduces a run's
// scripts. The cluster's timing is not reproducible: when an action lands
// within a rollout (after how many pods rolled) is, but how far the operator
// got by the time the action's write reaches the API server is not.
package soak

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
)

// Kind is one thing a script does to its rollout.
type Kind string

// The kinds of action a script draws from.
const (
	// Flip changes the template again mid-rollout, to a newer version.
	Flip Kind = "flip"
	// Revert puts the template back to the version before the rollout.
	Revert Kind = "revert"
	// CrashLoop releases a version whose pods never become Ready; a revert or
	// onFailure Rollback (CrashLoopRollback) ends it.
	CrashLoop Kind = "crash-loop"
	// CrashLoopRollback is a crash-looping release on a group with
	// onFailure Rollback and a short progressDeadline: the operator rolls it
	// back by itself.
	CrashLoopRollback Kind = "crash-loop-rollback"
	// Scale changes one zone's replicas mid-rollout.
	Scale Kind = "scale"
	// Pause sets spec.paused mid-rollout; the rollout ends Paused.
	Pause Kind = "pause"
	// GateFail gives the group an AfterBatch analysis gate that fails, with
	// onFailure Rollback.
	GateFail Kind = "gate-fail"
	// Kill SIGKILLs the leading operator; a fresh instance replaces it.
	Kill Kind = "sigkill-handover"
	// Term SIGTERMs the leading operator; a fresh instance replaces it.
	Term Kind = "sigterm-handover"
	// RestartAPIServer stops kube-apiserver and starts it again.
	RestartAPIServer Kind = "apiserver-restart"
	// Evict asks the Eviction API to evict one pod of the group (Zone, and
	// Pod the ordinal, the zone's first live pod when that one is gone), as
	// an autoscaler does, retrying while the group's budget refuses.
	Evict Kind = "evict"
	// Drain cordons a node (Node, an index into the nodes), evicts every
	// soak pod on it, retrying refusals, as kubectl drain does, and
	// uncordons it: pods of every group, in several zones at once.
	Drain Kind = "drain"
)

// Kinds lists every kind, in the order the report prints them.
var Kinds = []Kind{Flip, Revert, CrashLoop, CrashLoopRollback, Scale, Pause, GateFail, Kill, Term, RestartAPIServer, Evict, Drain}

// Outcome is how a rollout must end.
type Outcome string

// The outcomes a rollout can end with.
const (
	// Complete: every pod Ready on the last template the script applied.
	Complete Outcome = "Complete"
	// RolledBack: the group Failed, its rollback complete, every pod Ready on
	// the version before the rollout.
	RolledBack Outcome = "Failed-and-rolled-back"
	// Paused: the group Paused with pods left to roll.
	Paused Outcome = "Paused"
)

// Outcomes lists every outcome, in the order the report prints them.
var Outcomes = []Outcome{Complete, RolledBack, Paused}

// Step is one action of a script: Kind, once AfterRolls pods of the rollout
// have been rolled (0: with the release).
type Step struct {
	Kind       Kind
	AfterRolls int
	// Delta is the change of replicas of a Scale step, ±1 or ±2.
	Delta int
	// Zone is the zone a Scale step scales or an Evict step evicts from,
	// an index into the group's zones.
	Zone int
	// Pod is the ordinal of the pod an Evict step evicts.
	Pod int
	// Node is the node a Drain step drains, an index into the nodes.
	Node int
}

func (s Step) String() string {
	switch s.Kind {
	case Scale:
		return fmt.Sprintf("%s(zone %d %+d)@%d", s.Kind, s.Zone, s.Delta, s.AfterRolls)
	case Evict:
		return fmt.Sprintf("%s(zone %d pod %d)@%d", s.Kind, s.Zone, s.Pod, s.AfterRolls)
	case Drain:
		return fmt.Sprintf("%s(node %d)@%d", s.Kind, s.Node, s.AfterRolls)
	}
	return fmt.Sprintf("%s@%d", s.Kind, s.AfterRolls)
}

// Script is what one rollout does: release a new version, then its steps in
// order.
type Script struct {
	// Index numbers the scripts of a run from 0; Group is the group it runs on.
	Index, Group int
	Steps        []Step
}

func (s Script) String() string {
	steps := make([]string, 0, len(s.Steps))
	for _, st := range s.Steps {
		steps = append(steps, st.String())
	}
	if len(steps) == 0 {
		steps = []string{"plain"}
	}
	return fmt.Sprintf("#%d g%d: %s -> %s", s.Index, s.Group, strings.Join(steps, ", "), s.Expect())
}

// Has reports whether the script has a step of kind.
func (s Script) Has(kind Kind) bool {
	for _, st := range s.Steps {
		if st.Kind == kind {
			return true
		}
	}
	return false
}

// Expect is the outcome the script must end with: a failing gate or a
// crash loop under onFailure Rollback rolls back; a pause holds the rollout
// Paused; anything else (a revert included: the revert is a rollout of its
// own, back to where it started) completes.
func (s Script) Expect() Outcome {
	switch {
	case s.Has(GateFail), s.Has(CrashLoopRollback):
		return RolledBack
	case s.Has(Pause):
		return Paused
	}
	return Complete
}

// Reverts reports whether the script ends on the version before it: it
// reverts, or it rolls back.
func (s Script) Reverts() bool {
	return s.Has(Revert) || s.Expect() == RolledBack
}

// Config says what Generate draws.
type Config struct {
	Seed     uint64
	Rollouts int
	Groups   int
	// PodsPerRollout is how many pods a rollout of a group rolls (zones ×
	// replicas): steps land before half of them have rolled, so that they
	// land mid-rollout.
	PodsPerRollout int
	// APIServerRestarts is how many scripts restart the API server.
	APIServerRestarts int
	// Handovers turns operator handovers on.
	Handovers bool
	// Evictions turns Evict steps on, and Drains Drain steps (Drains only
	// with Evictions): the eviction webhook judges them with each group's
	// budget. Drains touch every pod on a node, so not on a control plane
	// other tests share.
	Evictions, Drains bool
	// Nodes is how many nodes a Drain step draws from.
	Nodes int
	// Replicas is each zone's pods at the start, which an Evict step draws
	// its pod from.
	Replicas int
}

// release kinds are how a script's rollout goes, one per script, with their
// weights: most are plain or disturbed by a user's change, some fail.
var releases = []struct {
	kind   Kind
	weight int
}{
	{"", 4}, {Flip, 3}, {Revert, 3}, {Scale, 3}, {Pause, 2}, {CrashLoop, 2}, {CrashLoopRollback, 2}, {GateFail, 2},
}

// handoverOdds: one script in handoverOdds hands over. A handover waits for
// the standby started by the previous one to warm its cache, which takes up
// to a minute under throttling, so more would mostly measure that wait.
const handoverOdds = 5

// evictOdds and drainOdds: one script in evictOdds evicts a pod of its
// group, one in drainOdds drains a node. A drain waits for every group whose
// pods it evicts, so more would mostly measure that wait.
const (
	evictOdds = 3
	drainOdds = 12
)

// Generate draws the scripts of a run: the same Config gives the same
// scripts. Each script has one release kind (or none), and, with
// Handovers, one operator handover in about one in handoverOdds; the API server
// restarts fall on scripts drawn from the same source. Scripts go to the
// groups round-robin.
func Generate(c Config) []Script {
	r := rand.New(rand.NewPCG(c.Seed, 0x50a4))
	half := max(1, c.PodsPerRollout/2)
	total := 0
	for _, rel := range releases {
		total += rel.weight
	}
	scripts := make([]Script, c.Rollouts)
	for i := range scripts {
		s := Script{Index: i, Group: i % max(1, c.Groups)}
		pick := r.IntN(total)
		var kind Kind
		for _, rel := range releases {
			if pick < rel.weight {
				kind = rel.kind
				break
			}
			pick -= rel.weight
		}
		switch kind {
		case "":
		case CrashLoop:
			// The crash loop comes with the release; the revert once the
			// member's budget is full of crash-looping pods (the runner waits
			// for that, not for rolls).
			s.Steps = append(s.Steps, Step{Kind: CrashLoop}, Step{Kind: Revert})
		case CrashLoopRollback, GateFail:
			s.Steps = append(s.Steps, Step{Kind: kind})
		case Scale:
			delta := []int{-2, -1, 1, 2}[r.IntN(4)]
			s.Steps = append(s.Steps, Step{Kind: Scale, AfterRolls: 1 + r.IntN(half), Delta: delta, Zone: r.IntN(3)})
		default:
			s.Steps = append(s.Steps, Step{Kind: kind, AfterRolls: 1 + r.IntN(half)})
		}
		if c.Handovers && r.IntN(handoverOdds) == 0 {
			s.Steps = append(s.Steps, Step{Kind: []Kind{Kill, Term}[r.IntN(2)], AfterRolls: 1 + r.IntN(half)})
		}
		if c.Evictions {
			// Drawn whatever the odds say, so that the other draws do not
			// depend on them.
			evict := Step{Kind: Evict, AfterRolls: 1 + r.IntN(half), Zone: r.IntN(3), Pod: r.IntN(max(1, c.Replicas))}
			drain := Step{Kind: Drain, AfterRolls: 1 + r.IntN(half), Node: r.IntN(max(1, c.Nodes))}
			if r.IntN(evictOdds) == 0 {
				s.Steps = append(s.Steps, evict)
			}
			if r.IntN(drainOdds) == 0 && c.Drains {
				s.Steps = append(s.Steps, drain)
			}
		}
		scripts[i] = s
	}
	for range min(c.APIServerRestarts, len(scripts)) {
		i := r.IntN(len(scripts))
		for scripts[i].Has(RestartAPIServer) {
			i = (i + 1) % len(scripts)
		}
		scripts[i].Steps = append(scripts[i].Steps, Step{Kind: RestartAPIServer, AfterRolls: 1 + r.IntN(half)})
	}
	for i := range scripts {
		scripts[i].order()
	}
	return scripts
}

// order puts the steps in the order they land. Nothing rolls once a pause
// lands, so the steps of a paused script land with the pause at the latest,
// and after it.
func (s *Script) order() {
	if i := slices.IndexFunc(s.Steps, func(st Step) bool { return st.Kind == Pause }); i >= 0 {
		for j := range s.Steps {
			s.Steps[j].AfterRolls = min(s.Steps[j].AfterRolls, s.Steps[i].AfterRolls)
		}
	}
	slices.SortStableFunc(s.Steps, func(a, b Step) int {
		if a.AfterRolls != b.AfterRolls {
			return a.AfterRolls - b.AfterRolls
		}
		// A pause lands first of what comes at the same moment: a handover
		// or a restart may take a while, and the rollout must still be open
		// when the pause lands.
		return boolInt(b.Kind == Pause) - boolInt(a.Kind == Pause)
	})
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
