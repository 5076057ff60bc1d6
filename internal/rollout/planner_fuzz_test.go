package rollout

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/disruption"
	"github.com/echelon-operator/echelon/internal/fuzzinput"
	"github.com/echelon-operator/echelon/test/builders"
)

// FuzzDecide builds random groups from the fuzz input and checks every plan
// against the RolloutGroup guarantees with an oracle written independently of
// the planner: it recomputes availability from the pods themselves.
func FuzzDecide(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 12}) // three members, group maxUnavailable 1
	f.Add([]byte("\x03\x00\x00\x00\x02\x41\x00\x00\x00\x00\x00\x00\x0a\x00\x00\x09\x01\x00\x07\x00\x00\x08"))
	f.Add([]byte("rolling three zones with a few not-ready and terminating pods, and a paused flag"))
	rng := rand.New(rand.NewPCG(1, 2))
	for range 400 {
		seed := make([]byte, 16+rng.IntN(150))
		for i := range seed {
			seed[i] = byte(rng.UintN(256))
		}
		f.Add(seed)
	}
	// Longer inputs, that reach the recorded intents, generated last.
	for range 300 {
		seed := make([]byte, 200+rng.IntN(600))
		for i := range seed {
			seed[i] = byte(rng.UintN(256))
		}
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		g := generateGroup(fuzzinput.New(data))
		before := make([][]*corev1.Pod, len(g.in.Members))
		for i, m := range g.in.Members {
			before[i] = slices.Clone(m.Pods)
		}
		plan := Decide(g.in)
		for i, m := range g.in.Members {
			if !slices.Equal(before[i], m.Pods) {
				t.Fatalf("Decide reordered or changed the pods of %s", m.Name)
			}
		}
		if err := g.check(plan); err != nil {
			t.Fatalf("%v\n%s\nplan: current=%q complete=%v blocked=%+v delete=%v requeue=%v message=%q",
				err, g.describe(), plan.Current, plan.Complete, plan.Blocked, podNames(plan.Delete), plan.RequeueAfter, plan.Message)
		}
		// The cache lists pods in any order; the decision must not depend on it.
		reversed := g.in
		reversed.Members = slices.Clone(g.in.Members)
		for i := range reversed.Members {
			reversed.Members[i].Pods = slices.Clone(reversed.Members[i].Pods)
			slices.Reverse(reversed.Members[i].Pods)
		}
		again := Decide(reversed)
		if !slices.Equal(podNames(again.Delete), podNames(plan.Delete)) || again.Current != plan.Current ||
			again.Message != plan.Message || again.RequeueAfter != plan.RequeueAfter || again.Complete != plan.Complete {
			t.Fatalf("plan depends on pod order: delete %v vs %v, message %q vs %q\n%s",
				podNames(plan.Delete), podNames(again.Delete), plan.Message, again.Message, g.describe())
		}
	})
}

// fuzzMaxUnavailable is a maxUnavailable as a user writes it.
type fuzzMaxUnavailable struct {
	set     bool
	percent bool
	value   int
}

func (m fuzzMaxUnavailable) String() string {
	switch {
	case !m.set:
		return "unset"
	case m.percent:
		return fmt.Sprintf("%d%%", m.value)
	default:
		return fmt.Sprint(m.value)
	}
}

// resolve is the documented rule: percent of replicas rounded down, never below 1.
func (m fuzzMaxUnavailable) resolve(replicas int) int {
	n := m.value
	if m.percent {
		n = m.value * replicas / 100
	}
	if !m.set || n < 1 {
		return 1
	}
	return n
}

func generateMaxUnavailable(b *fuzzinput.Bytes) fuzzMaxUnavailable {
	switch b.Intn(3) {
	case 1:
		return fuzzMaxUnavailable{set: true, value: b.Intn(6)}
	case 2:
		return fuzzMaxUnavailable{set: true, percent: true, value: b.Intn(101)}
	}
	return fuzzMaxUnavailable{}
}

type fuzzMember struct {
	name           string
	maxUnavailable fuzzMaxUnavailable
	// wanted are the ordinals the StatefulSet wants to exist.
	wanted []int
}

type fuzzGroup struct {
	in      Input
	members []fuzzMember
}

const fuzzRevisions = "r1r2r2r0" // pick 2 bytes; r2 is the update revision

func generateGroup(b *fuzzinput.Bytes) fuzzGroup {
	g := fuzzGroup{in: Input{Now: testNow, Deleting: sets.New[types.UID]()}}
	n := 1 + b.Intn(4)
	g.in.Paused = b.Rare(8)
	g.in.MinReadySeconds = []int32{0, 0, 10, 60}[b.Intn(4)]
	g.in.BatchInterval = []time.Duration{0, 0, 30 * time.Second, 5 * time.Minute}[b.Intn(4)]
	g.in.LastBatchTime = []time.Time{{}, testNow.Add(-10 * time.Second), testNow.Add(-30 * time.Second), testNow.Add(-time.Hour)}[b.Intn(4)]
	groupMax := generateMaxUnavailable(b)
	if b.Rare(64) {
		g.in.InvalidSpec = "spec.selector: invalid"
	}
	g.in.GroupDeleting = b.Rare(64)

	for i := range n {
		name := fmt.Sprintf("zone-%c", 'a'+i)
		fm := fuzzMember{name: name, maxUnavailable: groupMax}
		if b.Rare(4) {
			fm.maxUnavailable = generateMaxUnavailable(b) // member override
		}
		m := Member{Name: name}
		if v := fm.maxUnavailable; v.set {
			iv := intOrPercent(v.value)
			if v.percent {
				iv = intOrPercent(fmt.Sprintf("%d%%", v.value))
			}
			m.MaxUnavailable = &iv
		}
		if b.Rare(32) {
			m.ClaimedBy = []string{"other-group"}
		}
		exists := !b.Rare(32)

		replicas := b.Intn(13)
		start := 0
		if b.Rare(4) {
			start = 1 + b.Intn(3)
		}
		sts := builders.MakeStatefulSet(testNamespace, name).Replicas(int32(replicas)).OnDelete().Revision("r2").CurrentRevision("r1").Generation(3)
		switch b.Intn(8) {
		case 7:
			sts.RollingUpdate()
		case 6:
			sts.Strategy("")
		case 5:
			sts.Strategy("Canary")
		}
		switch b.Intn(16) {
		case 15:
			sts.NotObserved()
		case 14:
			sts.Revision("")
		}
		if start > 0 {
			sts.OrdinalsStart(int32(start))
		}
		if b.Rare(32) {
			sts.NilReplicas()
			replicas = 1
		}
		if b.Rare(32) {
			sts.Deleting(testNow.Add(-time.Second))
		}
		fm.wanted = ords(start, start+replicas)

		// Pods below start (ordinals moved) and above the end (being scaled away)
		// exist too and must be left alone.
		from, to := max(0, start-b.Intn(2)), start+replicas+b.Intn(3)
		for ord := from; ord < to; ord++ {
			rev := fuzzRevisions[2*b.Intn(4):][:2]
			pb := builders.MakePod(testNamespace, name, ord).Revision(rev)
			if b.Rare(16) {
				pb.NoRevision()
			}
			var deleting bool
			switch b.Intn(16) {
			case 6:
				continue // missing
			case 7:
				pb.Terminating(testNow.Add(-time.Second))
			case 8:
				deleting = true // deleted by Echelon, the cache still shows it
			case 9:
				pb.NotReady()
			case 10:
				pb.Ready(testNow.Add(-time.Duration(b.Intn(70)) * time.Second))
			case 11:
				pb.Phase([]corev1.PodPhase{corev1.PodPending, corev1.PodFailed}[b.Intn(2)]) // Ready condition left stale
			case 12:
				pb.Terminating(testNow.Add(-time.Second)).NotReady()
			}
			pod := pb.Obj()
			if deleting {
				g.in.Deleting.Insert(pod.UID)
			}
			m.Pods = append(m.Pods, pod)
		}
		// The StatefulSet controller's counts: usually every pod it has is Ready,
		// now and then (a scale-down, a lagging status) some are not.
		statusReady := len(m.Pods)
		if b.Rare(8) {
			statusReady = max(0, statusReady-1-b.Intn(2))
		}
		sts.StatusReplicas(int32(len(m.Pods)), int32(statusReady))
		// It counts the pods on the update revision too, and now and then that
		// count is older than the pods the cache shows.
		statusUpdated := 0
		for _, p := range m.Pods {
			if podRevision(p) == "r2" {
				statusUpdated++
			}
		}
		if b.Rare(8) {
			statusUpdated = max(0, statusUpdated-1-b.Intn(2))
		}
		sts.StatusUpdated(int32(statusUpdated))
		if exists {
			m.StatefulSet = sts.Obj()
		}
		// The cache returns pods in any order.
		if k := b.Intn(8); k > 0 && len(m.Pods) > 1 {
			rand.New(rand.NewPCG(uint64(k), uint64(len(m.Pods)))).Shuffle(len(m.Pods), func(i, j int) {
				m.Pods[i], m.Pods[j] = m.Pods[j], m.Pods[i]
			})
		}
		g.in.Members = append(g.in.Members, m)
		g.members = append(g.members, fm)
	}
	// Analysis gates and rollbacks are decided last, so that the corpus written
	// before them keeps its meaning (an exhausted input turns them off).
	g.in.MemberGates = b.Rare(2)
	g.in.RollingBack = b.Rare(4)
	if b.Rare(8) {
		g.in.Hold = &Hold{Reason: v1alpha1.ReasonWaitingForAnalysis, Message: "AfterBatch gate pending"}
	}
	for i := range g.in.Members {
		// r2 is the update revision: a stable r2 has not moved (or, rolling
		// back, has its template restored); r1 and r0 have moved.
		g.in.Members[i].StableRevision = []string{"", "r1", "r2", "r0"}[b.Intn(4)]
		g.in.Members[i].GatePassedRevision = []string{"", "r2", "r1"}[b.Intn(3)]
	}
	// The intents recorded in status.disruption, decided last for the same
	// reason: none, one or two, each of a member or of a zone that is none,
	// for any reason, decided from now to past its expiry and past being
	// forgotten, letting go pods of the zone that it shows untouched,
	// replaced (by a pod created since the decision, or one older than it),
	// or not at all (an ordinal missing or gone).
	for k := 0; k < 2 && b.Rare(2); k++ {
		zone := "zone-x"
		var pods []*corev1.Pod
		if k := b.Intn(n + 1); k < n {
			zone, pods = g.in.Members[k].Name, g.in.Members[k].Pods
		}
		reasons := []v1alpha1.DisruptionReason{v1alpha1.DisruptionRollout, v1alpha1.DisruptionDownscale, v1alpha1.DisruptionEviction}
		ago := []time.Duration{0, 5 * time.Second, 30 * time.Second, 44 * time.Second, 45 * time.Second, time.Minute, 11 * time.Minute}[b.Intn(7)]
		in := disruption.Intent{Zone: zone, Reason: reasons[b.Intn(3)], Holder: "someone", Decided: testNow.Add(-ago), Expires: testNow.Add(-ago).Add(intentLife)}
		for range 1 + b.Intn(2) {
			name, uid := fmt.Sprintf("%s-%d", zone, b.Intn(20)), types.UID("uid-gone")
			if len(pods) > 0 && !b.Rare(4) {
				p := pods[b.Intn(len(pods))]
				name, uid = p.Name, p.UID
				switch b.Intn(4) {
				case 1:
					uid += "-before"
					p.CreationTimestamp = metav1.NewTime(in.Decided)
				case 2:
					uid += "-before"
				}
			}
			in.Pods = append(in.Pods, disruption.IntentPod{Name: name, UID: uid})
		}
		if k < n && b.Rare(3) {
			// The group's own reservation of the zone: its pods, highest
			// ordinal first, at most 1 to 3 unavailable at once.
			in.Reason, in.Holder, in.MaxAtOnce, in.Pods = v1alpha1.DisruptionRollout, "RolloutGroup fuzz", int32(1+b.Intn(3)), nil
			// Mostly young enough to act on (the act window less the
			// margin is 20 s), sometimes just not.
			ago := []time.Duration{0, 5 * time.Second, 19 * time.Second, 20 * time.Second}[b.Intn(4)]
			in.Decided, in.Expires = testNow.Add(-ago), testNow.Add(-ago).Add(intentLife)
			ordered := slices.DeleteFunc(slices.Clone(pods), func(p *corev1.Pod) bool { return podRevision(p) == "r2" && !b.Rare(4) })
			slices.SortFunc(ordered, func(a, c *corev1.Pod) int { return cmp.Compare(nameOrdinal(c.Name), nameOrdinal(a.Name)) })
			for _, p := range ordered {
				in.Pods = append(in.Pods, disruption.IntentPod{Name: p.Name, UID: p.UID})
			}
		}
		g.in.Intents = append(g.in.Intents, in)
	}
	// Partitions of RollingUpdate members and a stopping hold, last too: none
	// set, held at the replicas, or anywhere from 0 to past the replicas.
	for i, m := range g.in.Members {
		sts := m.StatefulSet
		if sts == nil || !IsPartitioned(sts) || b.Rare(8) {
			continue
		}
		n := len(g.members[i].wanted)
		p := []int{n, n, 0, b.Intn(n + 2)}[b.Intn(4)]
		sts.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To(int32(p))}
		if b.Rare(4) {
			sts.Status.CurrentRevision = sts.Status.UpdateRevision
		}
	}
	if g.in.Hold != nil && b.Rare(2) {
		g.in.Hold.Stop = true
	}
	// Steps, last of all: up to four of increasing percent, each without a
	// pause, with a duration, or waiting for a promote; the rollout at any
	// of them, waiting for anything since any time, promoted or not.
	if b.Rare(2) {
		var steps []v1alpha1.RolloutStep
		for pct := int32(0); len(steps) < 1+b.Intn(4) && pct < 100; {
			pct = min(100, pct+1+int32(b.Intn(60)))
			step := v1alpha1.RolloutStep{Percent: pct}
			switch b.Intn(3) {
			case 1:
				step.Pause = &v1alpha1.StepPause{Duration: &metav1.Duration{Duration: time.Minute}}
			case 2:
				step.Pause = &v1alpha1.StepPause{}
			}
			steps = append(steps, step)
		}
		waits := []v1alpha1.StepWait{v1alpha1.StepWaitPods, v1alpha1.StepWaitAvailability, v1alpha1.StepWaitDuration, v1alpha1.StepWaitPromote}
		g.in.Steps = &StepsInput{Steps: steps, Index: int32(b.Intn(len(steps) + 1)), WaitingFor: waits[b.Intn(4)],
			Since: testNow.Add(-time.Duration(b.Intn(120)) * time.Second), Promoted: b.Rare(2)}
	}
	g.in.Holder = "RolloutGroup fuzz"
	return g
}

// fate is what the pods of the group show of a pod an intent let go.
type fate int

const (
	// fatePending: shown untouched (wanted, not terminating, available), the
	// intent not expired.
	fatePending fate = iota
	// fateUnderWay: shown going, missing, not available, or replaced by a pod
	// that is not available or older than the decision.
	fateUnderWay
	// fateDone: replaced by an available pod created no earlier than the
	// decision's second, its ordinal not shown at all, or shown untouched
	// past the intent's expiry.
	fateDone
)

// memberIndex is the index of the member zone with a StatefulSet; -1 when none.
func (g fuzzGroup) memberIndex(zone string) int {
	return slices.IndexFunc(g.in.Members, func(m Member) bool { return m.Name == zone && m.StatefulSet != nil })
}

// shownAvailable reports whether pod p of member i counts as available to
// the budget: at a wanted ordinal, not terminating, available, and not
// released to its StatefulSet controller by a partition.
func (g fuzzGroup) shownAvailable(i int, p *corev1.Pod) bool {
	v := g.view(i)
	ord := slices.IndexFunc(v.wanted, func(o int) bool { return p.Name == fmt.Sprintf("%s-%d", v.name, o) })
	if ord < 0 || g.terminating(p) || !g.available(p) {
		return false
	}
	return !(v.partitioned && v.updateRev != "" && v.wanted[ord] >= v.start+v.partition && podRevision(p) != v.updateRev)
}

func (g fuzzGroup) fateOf(in disruption.Intent, ip disruption.IntentPod) fate {
	expired := !testNow.Before(in.Expires)
	i := g.memberIndex(in.Zone)
	if i < 0 {
		if expired {
			return fateDone
		}
		return fatePending
	}
	k := slices.IndexFunc(g.in.Members[i].Pods, func(p *corev1.Pod) bool { return p.Name == ip.Name })
	if k < 0 {
		if slices.ContainsFunc(g.members[i].wanted, func(o int) bool { return ip.Name == fmt.Sprintf("%s-%d", in.Zone, o) }) {
			return fateUnderWay // missing
		}
		return fateDone
	}
	p := g.in.Members[i].Pods[k]
	// A pod created before the decision is the one the intent took, or
	// one older than it (a view that lags the intent): untouched either way.
	untouched := p.UID == ip.UID || p.CreationTimestamp.Time.Before(in.Decided.Truncate(time.Second))
	switch {
	case untouched && g.shownAvailable(i, p) && expired:
		return fateDone
	case untouched && g.shownAvailable(i, p):
		return fatePending
	case g.shownAvailable(i, p):
		return fateDone
	}
	return fateUnderWay
}

// intentDone reports whether every pod of in is done, or in has been
// expired for more than ten minutes and is forgotten.
func (g fuzzGroup) intentDone(in disruption.Intent) bool {
	if testNow.After(in.Expires.Add(10 * time.Minute)) {
		return true
	}
	for _, ip := range in.Pods {
		if g.fateOf(in, ip) != fateDone {
			return false
		}
	}
	return true
}

// pendingPods names the pods of zone that recorded intents let go and
// that are pending.
func (g fuzzGroup) pendingPods(zone string) sets.Set[string] {
	out := sets.New[string]()
	for _, in := range g.in.Intents {
		if in.Zone == zone {
			out.Insert(g.countedPods(in)...)
		}
	}
	return out
}

// countedPods names the pods of in that are pending and count: all of a
// plain intent's; of a reservation, the first maxAtOnce less its zone's
// unavailable pods (wanted ones not shown available, leaving and released
// ones).
func (g fuzzGroup) countedPods(in disruption.Intent) []string {
	room := len(in.Pods)
	if in.MaxAtOnce > 0 {
		room = int(in.MaxAtOnce)
		if i := g.memberIndex(in.Zone); i >= 0 {
			v := g.view(i)
			room = max(0, room-(g.unavailable(v, nil)+v.leaving+g.released(v, v.partition)))
		}
	}
	var out []string
	for _, ip := range in.Pods {
		if len(out) >= room {
			break
		}
		if g.fateOf(in, ip) == fatePending {
			out = append(out, ip.Name)
		}
	}
	return out
}

// intentsStop reports whether the recorded intents stop a rollout's batch
// in zone, whatever the batch: a downscale's intent not done, in any zone,
// or another zone's intent with a pod pending. until is the latest of the
// stopping intents' expiries from now, 0 when one of them has expired
// (only the pods can end it then).
func (g fuzzGroup) intentsStop(zone string) (stop bool, until time.Duration) {
	expired := false
	for _, in := range g.in.Intents {
		crossing := in.Reason == v1alpha1.DisruptionDownscale && !g.intentDone(in)
		if !crossing && (in.Zone == zone || len(g.countedPods(in)) == 0) {
			continue
		}
		stop = true
		d := in.Expires.Sub(testNow)
		expired = expired || d <= 0
		until = max(until, d)
	}
	if expired {
		until = 0
	}
	return stop, until
}

// overBudget reports whether a batch of zone's pods named batch, that costs
// (some of them shown available), takes the zone past its maxUnavailable:
// its wanted pods not shown available, its pods leaving, its pending pods
// not in the batch and the batch's pods shown available.
func (g fuzzGroup) overBudget(zone string, batch []string) bool {
	i := g.memberIndex(zone)
	v := g.view(i)
	used := g.unavailable(v, nil) + v.leaving
	if v.updateRev != "" {
		used += g.released(v, v.partition)
	}
	cost := 0
	for _, p := range g.in.Members[i].Pods {
		if slices.Contains(batch, p.Name) && g.shownAvailable(i, p) {
			cost++
		}
	}
	notInBatch := g.pendingPods(zone).Delete(batch...).Len()
	return cost > 0 && used+notInBatch+cost > v.maxUnav
}

// checkBudget: a batch is one the budget allowed, for its pods and zone:
// no recorded intent stops it and, with the zone's pending pods counted, it
// keeps the zone within its maxUnavailable. It asks for its intent to be
// recorded, naming the batch's pods as shown, after the recorded intents
// not done.
func (g fuzzGroup) checkBudget(plan Plan) error {
	if len(plan.Delete) == 0 {
		if plan.Budget != nil && plan.Budget.Verdict.Allowed {
			return fmt.Errorf("no batch, but the budget allowed %+v", plan.Budget.Request)
		}
		return nil
	}
	if stop, _ := g.intentsStop(plan.Current); stop {
		return fmt.Errorf("deletes %v of %s while intents %+v stop it", podNames(plan.Delete), plan.Current, g.in.Intents)
	}
	if g.overBudget(plan.Current, podNames(plan.Delete)) {
		return fmt.Errorf("deletes %v of %s past its maxUnavailable, with pods %v pending", podNames(plan.Delete), plan.Current, sets.List(g.pendingPods(plan.Current)))
	}
	bd := plan.Budget
	if bd == nil || !bd.Verdict.Allowed {
		return fmt.Errorf("deletes %v without the budget's consent: %+v", podNames(plan.Delete), bd)
	}
	if bd.Request.Zone != plan.Current || bd.Request.Reason != v1alpha1.DisruptionRollout || !slices.Equal(bd.Request.Pods, podNames(plan.Delete)) {
		return fmt.Errorf("budget asked for %+v, batch %v of %s", bd.Request, podNames(plan.Delete), plan.Current)
	}
	if bd.Reserved {
		return g.checkReserved(plan)
	}
	want := disruption.Intent{Zone: plan.Current, Reason: v1alpha1.DisruptionRollout, Holder: g.in.Holder, Decided: testNow, Expires: testNow.Add(intentLife)}
	for _, p := range plan.Delete {
		want.Pods = append(want.Pods, disruption.IntentPod{Name: p.Name, UID: p.UID})
	}
	if rest, atOnce := g.reservation(plan); atOnce > 0 {
		want.Pods, want.MaxAtOnce = append(want.Pods, rest...), atOnce
	}
	if !reflect.DeepEqual(bd.Verdict.Intent, want) {
		return fmt.Errorf("intent to record %+v, want %+v", bd.Verdict.Intent, want)
	}
	var record []disruption.Intent
	for _, in := range g.in.Intents {
		if !g.intentDone(in) && !g.replacedBy(in, want) {
			record = append(record, in)
		}
	}
	if record = append(record, want); !reflect.DeepEqual(bd.Verdict.Record, record) {
		return fmt.Errorf("record to write %+v, want %+v", bd.Verdict.Record, record)
	}
	if !bd.Record() {
		return fmt.Errorf("Record() = false for an allowed batch")
	}
	return nil
}

// replacedBy reports whether the new reservation next takes the place of
// the recorded intent old: both reservations of the group in one zone, and
// every pod of old still pending named by next.
func (g fuzzGroup) replacedBy(old, next disruption.Intent) bool {
	if old.MaxAtOnce == 0 || next.MaxAtOnce == 0 || old.Holder != next.Holder || old.Zone != next.Zone || old.Reason != next.Reason {
		return false
	}
	for _, ip := range old.Pods {
		if g.fateOf(old, ip) == fatePending && !slices.ContainsFunc(next.Pods, func(n disruption.IntentPod) bool { return n.Name == ip.Name }) {
			return false
		}
	}
	return true
}

// checkReserved: a batch that goes with no record of its own is of a
// partitioned member, and a reservation of the group's in its zone,
// decided recently enough for the act to come in its window, counts every
// pod of it; the verdict carries that reservation, to fence the act by.
func (g fuzzGroup) checkReserved(plan Plan) error {
	bd := plan.Budget
	if !g.view(g.memberIndex(plan.Current)).partitioned || bd.Verdict.Record != nil || bd.Record() {
		return fmt.Errorf("a batch of %s under a reservation: partitioned=%v record=%+v", plan.Current, g.view(g.memberIndex(plan.Current)).partitioned, bd.Verdict.Record)
	}
	in := bd.Verdict.Intent
	if !slices.ContainsFunc(g.in.Intents, func(r disruption.Intent) bool { return reflect.DeepEqual(r, in) }) {
		return fmt.Errorf("the batch goes under %+v, which is not recorded", in)
	}
	if in.MaxAtOnce == 0 || in.Holder != g.in.Holder || in.Zone != plan.Current || in.Reason != v1alpha1.DisruptionRollout {
		return fmt.Errorf("the batch goes under %+v, not a reservation of the group's in %s", in, plan.Current)
	}
	if !testNow.Before(in.Decided.Add(disruption.ActWindow - 10*time.Second)) {
		return fmt.Errorf("the batch goes under a reservation decided at %s, too late to act on", in.Decided)
	}
	counted := g.countedPods(in)
	for _, p := range plan.Delete {
		if !slices.Contains(counted, p.Name) {
			return fmt.Errorf("the batch's pod %s is not among those the reservation counts, %v", p.Name, counted)
		}
	}
	return nil
}

// reservation is what the intent of a partitioned member's batch reserves
// after it: the member's outdated pods below the batch, highest ordinal
// first, and the most of the zone's pods unavailable at once, which is
// where the batch leaves the zone (its unavailable, leaving and released
// pods, and the batch's available ones) within what the pods other intents
// let go leave of its maxUnavailable; no pods and 0 when there is nothing
// to reserve.
func (g fuzzGroup) reservation(plan Plan) ([]disruption.IntentPod, int32) {
	i := g.memberIndex(plan.Current)
	v := g.view(i)
	if !v.partitioned || plan.Rotation {
		return nil, 0
	}
	lowest := -1
	for _, p := range plan.Delete {
		if o := nameOrdinal(p.Name); lowest < 0 || o < lowest {
			lowest = o
		}
	}
	var rest []disruption.IntentPod
	for o := lowest - 1; o >= 0; o-- {
		p := v.live[o]
		if p == nil || !slices.Contains(v.wanted, o) || podRevision(p) == v.updateRev {
			continue
		}
		rest = append(rest, disruption.IntentPod{Name: p.Name, UID: p.UID})
	}
	if len(rest) == 0 {
		return nil, 0
	}
	used := g.unavailable(v, nil) + v.leaving + g.released(v, v.partition)
	cost := 0
	for _, p := range g.in.Members[i].Pods {
		if slices.Contains(podNames(plan.Delete), p.Name) && g.shownAvailable(i, p) {
			cost++
		}
	}
	others := g.pendingPods(plan.Current).Delete(podNames(plan.Delete)...).Len()
	return rest, int32(max(0, min(used+cost, max(v.maxUnav, 1)-others)))
}

// budgetAllows is want, or 0 when checkBudgetWait finds the batch refused.
func (g fuzzGroup) budgetAllows(plan Plan, zone string, want int) (int, error) {
	if want == 0 {
		return 0, nil
	}
	refused, err := g.checkBudgetWait(plan, zone, want)
	if refused {
		want = 0
	}
	return want, err
}

// checkBudgetWait: a batch of want pods of zone that no intent stops is
// refused only for the zone's own pending pods, which take it past its
// maxUnavailable; it reports whether it was.
func (g fuzzGroup) checkBudgetWait(plan Plan, zone string, want int) (bool, error) {
	bd := plan.Budget
	if bd == nil || bd.Verdict.Allowed {
		return false, nil
	}
	switch {
	case bd.Verdict.Code != disruption.CodeZoneBudget || plan.Reason != v1alpha1.ReasonWaitingForDisruption:
		return true, fmt.Errorf("%s: budget refused %+v (%s, reason %s), want a refusal for the zone's own pending pods only", zone, bd.Request, bd.Verdict.Code, plan.Reason)
	case bd.Request.Zone != zone || len(bd.Request.Pods) != want:
		return true, fmt.Errorf("budget asked for %+v, want %d pods of %s", bd.Request, want, zone)
	case !g.overBudget(zone, bd.Request.Pods):
		return true, fmt.Errorf("budget refused %v of %s, within its maxUnavailable with pods %v pending: %s", bd.Request.Pods, zone, sets.List(g.pendingPods(zone)), bd.Verdict.Message)
	}
	return true, nil
}

func (g fuzzGroup) describe() string {
	var s strings.Builder
	fmt.Fprintf(&s, "group: deleting=%v invalidSpec=%q paused=%v minReadySeconds=%d batchInterval=%v lastBatch=%v deleting=%v memberGates=%v rollingBack=%v hold=%v intents=%+v\n",
		g.in.GroupDeleting, g.in.InvalidSpec, g.in.Paused, g.in.MinReadySeconds, g.in.BatchInterval, g.in.LastBatchTime, sets.List(g.in.Deleting),
		g.in.MemberGates, g.in.RollingBack, g.in.Hold != nil, g.in.Intents)
	for i, m := range g.in.Members {
		fmt.Fprintf(&s, "member %s maxUnavailable=%v claimedBy=%v stable=%q gatePassed=%q", m.Name, g.members[i].maxUnavailable, m.ClaimedBy,
			m.StableRevision, m.GatePassedRevision)
		if sts := m.StatefulSet; sts == nil {
			s.WriteString(" statefulset=missing")
		} else {
			fmt.Fprintf(&s, " strategy=%q wanted=%v gen=%d/%d updateRevision=%q status.replicas=%d status.ready=%d deleting=%v", sts.Spec.UpdateStrategy.Type,
				g.members[i].wanted, sts.Status.ObservedGeneration, sts.Generation, sts.Status.UpdateRevision,
				sts.Status.Replicas, sts.Status.ReadyReplicas, sts.DeletionTimestamp != nil)
		}
		s.WriteString("\n")
		for _, p := range m.Pods {
			since, ready := oracleReadySince(p)
			fmt.Fprintf(&s, "  %s rev=%s phase=%s ready=%v since=%v terminating=%v deleting=%v\n", p.Name, podRevision(p),
				p.Status.Phase, ready, testNow.Sub(since), p.DeletionTimestamp != nil, g.in.Deleting.Has(p.UID))
		}
	}
	return s.String()
}

// oracleReadySince is the Ready condition read straight from the pod.
func oracleReadySince(p *corev1.Pod) (time.Time, bool) {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && p.Status.Phase == corev1.PodRunning {
			return c.LastTransitionTime.Time, true
		}
	}
	return time.Time{}, false
}

// memberView is the oracle's own reading of one member.
type memberView struct {
	name      string
	stable    string
	passed    string
	maxUnav   int
	updateRev string
	wanted    []int
	// live is the non-terminating pod at each wanted ordinal.
	live map[int]*corev1.Pod
	pods sets.Set[*corev1.Pod]
	// leaving counts the member's pods, terminating or not, at ordinals it does
	// not want (a scale-down in progress).
	leaving int
	// statusBehind: the StatefulSet's own status counts more pods than Ready
	// ones, or, while every wanted pod is on the update revision, fewer updated
	// pods than the member wants.
	statusBehind bool
	// partitioned members are rolled by their partition, relative to start.
	partitioned      bool
	partition, start int
	replicas         int
	currentRev       string
}

func (g fuzzGroup) view(i int) memberView {
	m, fm := g.in.Members[i], g.members[i]
	v := memberView{name: m.Name, maxUnav: fm.maxUnavailable.resolve(len(fm.wanted)), wanted: fm.wanted,
		live: map[int]*corev1.Pod{}, pods: sets.New(m.Pods...), stable: m.StableRevision, passed: m.GatePassedRevision}
	if m.StatefulSet != nil {
		v.updateRev = m.StatefulSet.Status.UpdateRevision
		v.statusBehind = m.StatefulSet.Status.Replicas > m.StatefulSet.Status.ReadyReplicas
		v.currentRev = m.StatefulSet.Status.CurrentRevision
		if m.StatefulSet.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType {
			v.partitioned = true
			if ru := m.StatefulSet.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
				v.partition = int(*ru.Partition)
			}
		}
		if m.StatefulSet.Spec.Ordinals != nil {
			v.start = int(m.StatefulSet.Spec.Ordinals.Start)
		}
	}
	v.replicas = len(fm.wanted)
	allOnUpdate := true
	for _, p := range m.Pods {
		if slices.ContainsFunc(fm.wanted, func(o int) bool { return p.Name == fmt.Sprintf("%s-%d", m.Name, o) }) && podRevision(p) != v.updateRev {
			allOnUpdate = false
		}
	}
	if sts := m.StatefulSet; sts != nil && allOnUpdate && sts.Status.Replicas > 0 && int(sts.Status.UpdatedReplicas) < len(fm.wanted) {
		v.statusBehind = true
	}
	for _, p := range m.Pods {
		wanted := slices.ContainsFunc(fm.wanted, func(o int) bool { return p.Name == fmt.Sprintf("%s-%d", m.Name, o) })
		if !wanted {
			v.leaving++
			continue
		}
		if g.terminating(p) {
			continue
		}
		for _, o := range fm.wanted {
			if p.Name == fmt.Sprintf("%s-%d", m.Name, o) {
				v.live[o] = p
			}
		}
	}
	return v
}

// disrupted reports whether the member uses availability: a wanted pod missing,
// terminating or not available, a pod leaving, or its status short of Ready pods.
func (g fuzzGroup) disrupted(v memberView) bool {
	return g.unavailable(v, nil) > 0 || v.leaving > 0 || v.statusBehind || g.released(v, v.partition) > 0
}

// released counts the available outdated live pods of a partitioned member at
// or above partition: the StatefulSet controller may take them down.
func (g fuzzGroup) released(v memberView, partition int) int {
	if !v.partitioned {
		return 0
	}
	n := 0
	for o, p := range v.live {
		if o >= v.start+partition && podRevision(p) != v.updateRev && g.available(p) {
			n++
		}
	}
	return n
}

// outdatedBelow are the live outdated pods of v below ordinal end, highest first.
func outdatedBelow(v memberView, end int) []*corev1.Pod {
	var out []*corev1.Pod
	for o := end - 1; o >= v.start; o-- {
		if p := v.live[o]; p != nil && podRevision(p) != v.updateRev {
			out = append(out, p)
		}
	}
	return out
}

func (g fuzzGroup) terminating(p *corev1.Pod) bool {
	return p.DeletionTimestamp != nil || g.in.Deleting.Has(p.UID)
}

func (g fuzzGroup) available(p *corev1.Pod) bool {
	since, ok := oracleReadySince(p)
	return ok && !testNow.Before(since.Add(time.Duration(g.in.MinReadySeconds)*time.Second))
}

// unavailable counts wanted ordinals without a live, available pod that is not
// in gone.
func (g fuzzGroup) unavailable(v memberView, gone sets.Set[*corev1.Pod]) int {
	n := 0
	for _, o := range v.wanted {
		if p := v.live[o]; p == nil || gone.Has(p) || !g.available(p) {
			n++
		}
	}
	return n
}

// outdated returns the live wanted pods not on the update revision, split by
// availability.
func (g fuzzGroup) outdated(v memberView) (available, notAvailable int) {
	for _, p := range v.live {
		if podRevision(p) == v.updateRev {
			continue
		}
		if g.available(p) {
			available++
		} else {
			notAvailable++
		}
	}
	return available, notAvailable
}

// updated counts the live wanted pods on the update revision.
func (g fuzzGroup) updated(v memberView) int {
	n := 0
	for _, p := range v.live {
		if podRevision(p) == v.updateRev {
			n++
		}
	}
	return n
}

// firstBlocker is the first member, in order, that must stop the group.
func (g fuzzGroup) firstBlocker() (member, reason string) {
	if g.in.GroupDeleting {
		return "", v1alpha1.ReasonGroupDeleting
	}
	if g.in.InvalidSpec != "" {
		return "", v1alpha1.ReasonInvalidSpec
	}
	for _, m := range g.in.Members {
		switch {
		case m.StatefulSet == nil:
			return m.Name, v1alpha1.ReasonMemberNotFound
		case m.StatefulSet.DeletionTimestamp != nil:
			return m.Name, v1alpha1.ReasonMemberDeleting
		case !controlledStrategy(m.StatefulSet):
			return m.Name, v1alpha1.ReasonUnsupportedStrategy
		case len(m.ClaimedBy) > 0:
			return m.Name, v1alpha1.ReasonMemberClaimedByOtherGroup
		}
	}
	return "", ""
}

func (g fuzzGroup) settled() bool {
	for _, m := range g.in.Members {
		if s := m.StatefulSet; s != nil && (s.Status.ObservedGeneration < s.Generation || s.Status.UpdateRevision == "") {
			return false
		}
	}
	return true
}

// gateDue is the member whose AfterMember gate holds the group: the first, in
// list order, that moved (update revision not its known stable one), runs the
// update revision on every wanted pod with nothing disrupted, and has not
// passed its gate for that revision.
func (g fuzzGroup) gateDue(views []memberView) string {
	if !g.in.MemberGates || g.in.RollingBack {
		return ""
	}
	for _, v := range views {
		if v.stable != "" && v.updateRev != v.stable && v.passed != v.updateRev &&
			!g.disrupted(v) && g.updated(v) == len(v.wanted) {
			return v.name
		}
	}
	return ""
}

// restored reports whether a member may be rolled while rolling back: its
// update revision is its known stable revision.
func (v memberView) restored() bool {
	return v.stable != "" && v.updateRev == v.stable
}

func (g fuzzGroup) batchWait() time.Duration {
	if g.in.BatchInterval == 0 || g.in.LastBatchTime.IsZero() {
		return 0
	}
	return max(0, g.in.LastBatchTime.Add(g.in.BatchInterval).Sub(testNow))
}

func (g fuzzGroup) check(plan Plan) error {
	deleted := sets.New(plan.Delete...)
	if plan.RequeueAfter < 0 {
		return fmt.Errorf("negative RequeueAfter %v", plan.RequeueAfter)
	}
	if len(plan.Members) != len(g.in.Members) {
		return fmt.Errorf("%d member states for %d members", len(plan.Members), len(g.in.Members))
	}

	// (d) blocked groups are not touched, and the first blocker is reported.
	blocker, reason := g.firstBlocker()
	switch {
	case reason != "" && plan.Blocked == nil:
		return fmt.Errorf("member %q blocks the group (%s) but the plan is not blocked", blocker, reason)
	case reason != "" && (plan.Blocked.Member != blocker || plan.Blocked.Reason != reason || !strings.Contains(plan.Blocked.Message, blocker)):
		return fmt.Errorf("Blocked = %+v, want %s on %q", *plan.Blocked, reason, blocker)
	case reason == "" && plan.Blocked != nil:
		return fmt.Errorf("not blocked, got Blocked %+v", *plan.Blocked)
	case reason != "" && (len(plan.Delete) > 0 || plan.Complete || len(plan.AdvanceRevision) > 0):
		return fmt.Errorf("blocked group: Delete = %v, Complete = %v, AdvanceRevision = %v", podNames(plan.Delete), plan.Complete, plan.AdvanceRevision)
	case reason != "":
		return nil
	}

	if err := g.checkBudget(plan); err != nil {
		return err
	}
	views := make([]memberView, len(g.in.Members))
	for i := range views {
		views[i] = g.view(i)
	}
	if err := g.checkMinReadyRequeue(plan, views); err != nil {
		return err
	}
	// (g) gates: an AfterMember gate due is named, and nothing is deleted
	// while one is due or a hold is set.
	due := ""
	if g.settled() {
		due = g.gateDue(views)
	}
	if plan.GateDue != due {
		return fmt.Errorf("GateDue = %q, want %q", plan.GateDue, due)
	}
	if len(plan.Delete) > 0 && (due != "" || g.in.Hold != nil) {
		return fmt.Errorf("deletes %v while gate of %q due or hold %v", podNames(plan.Delete), due, g.in.Hold)
	}
	// currentRevision is advanced only on a member whose every wanted pod runs
	// the update revision and is available, with nothing leaving.
	for _, name := range plan.AdvanceRevision {
		i := slices.IndexFunc(views, func(v memberView) bool { return v.name == name })
		if i < 0 || !g.settled() || g.disrupted(views[i]) || g.updated(views[i]) != len(views[i].wanted) {
			return fmt.Errorf("advances the currentRevision of %s, which is not complete", name)
		}
	}

	// (f) Complete exactly when every wanted pod is live, updated and available,
	// and no member is still scaling down.
	allDone := g.settled()
	for _, v := range views {
		if v.leaving > 0 || v.statusBehind {
			allDone = false
		}
		for _, o := range v.wanted {
			if p := v.live[o]; p == nil || podRevision(p) != v.updateRev || !g.available(p) {
				allDone = false
			}
		}
	}
	if plan.Complete != allDone {
		return fmt.Errorf("Complete = %v, want %v", plan.Complete, allDone)
	}
	if plan.Complete && len(plan.Delete) > 0 {
		return fmt.Errorf("complete plan deletes %v", podNames(plan.Delete))
	}

	// (d) paused, unsettled, or within batchInterval: nothing deleted.
	if len(plan.Delete) > 0 {
		switch {
		case g.in.Paused:
			return fmt.Errorf("paused group deletes %v", podNames(plan.Delete))
		case !g.settled():
			return fmt.Errorf("unsettled group deletes %v", podNames(plan.Delete))
		case g.batchWait() > 0:
			return fmt.Errorf("deletes %v %v before batchInterval ends", podNames(plan.Delete), g.batchWait())
		}
	}

	if len(plan.Delete) > 0 {
		var cur *memberView
		for i := range views {
			if views[i].name == plan.Current {
				cur = &views[i]
			}
		}
		if cur == nil {
			return fmt.Errorf("deletes %v but Current %q is no member", podNames(plan.Delete), plan.Current)
		}
		// (h) a rollback rolls only members whose template is restored: nothing
		// rolls forward.
		if g.in.RollingBack && !cur.restored() {
			return fmt.Errorf("rolling back, deletes %v of %s whose update revision %q is not its stable revision %q",
				podNames(plan.Delete), cur.name, cur.updateRev, cur.stable)
		}
		// (a) and (e): one member's pods, each once, live, wanted and outdated.
		if deleted.Len() != len(plan.Delete) {
			return fmt.Errorf("a pod is deleted twice: %v", podNames(plan.Delete))
		}
		for _, p := range plan.Delete {
			switch {
			case !cur.pods.Has(p):
				return fmt.Errorf("deletes %s, which is not a pod of Current %s", p.Name, cur.name)
			case g.terminating(p):
				return fmt.Errorf("deletes %s, which is already terminating", p.Name)
			case podRevision(p) == cur.updateRev:
				return fmt.Errorf("deletes %s, which already runs the update revision", p.Name)
			case !slices.ContainsFunc(cur.wanted, func(o int) bool { return cur.live[o] == p }):
				return fmt.Errorf("deletes %s, which is not a wanted ordinal", p.Name)
			}
		}
		// (b) every other member is whole: no wanted pod missing, terminating or
		// not available, no pod leaving after a scale-down, a status with every
		// pod Ready.
		for _, v := range views {
			if v.name != cur.name && g.disrupted(v) {
				return fmt.Errorf("deletes pods of %s while %s uses availability: %d wanted pods not available, %d leaving, status behind %v",
					cur.name, v.name, g.unavailable(v, nil), v.leaving, v.statusBehind)
			}
		}
		if cur.partitioned {
			if err := g.checkRelease(plan, *cur); err != nil {
				return err
			}
		} else if err := g.checkDeletionOrder(plan, *cur, deleted); err != nil {
			return err
		}
	}
	if err := g.checkPartitions(plan, views); err != nil {
		return err
	}
	if err := g.checkSteps(plan, views); err != nil {
		return err
	}

	// Progress: when nothing holds the group back, the planner does the documented
	// next step rather than waiting.
	if g.in.Paused || !g.settled() {
		return nil
	}
	var notAvailable []int
	for i, v := range views {
		if g.disrupted(v) {
			notAvailable = append(notAvailable, i)
		}
	}
	target := -1
	switch len(notAvailable) {
	case 0:
		// A member partly rolled already is finished before an untouched one;
		// a rollback goes in reverse list order (most recently rolled first).
		order := ords(0, len(views))
		if g.in.RollingBack {
			slices.Reverse(order)
		}
		for _, partly := range []bool{true, false} {
			for _, i := range order {
				if a, na := g.outdated(views[i]); a+na > 0 && (!partly || g.updated(views[i]) > 0) && target < 0 {
					target = i
				}
			}
		}
	case 1:
		target = notAvailable[0]
	default:
		if len(plan.Delete) > 0 {
			return fmt.Errorf("several members have pods not available, but %v deleted", podNames(plan.Delete))
		}
		return nil
	}
	if target < 0 {
		return nil // complete, checked above
	}
	v := views[target]
	if plan.Current != v.name {
		return fmt.Errorf("Current = %q, want %s", plan.Current, v.name)
	}
	avail, notAvail := g.outdated(v)
	want := 0
	switch {
	case v.partitioned:
		want = len(g.releasable(v))
	case avail+notAvail > 0:
		want = notAvail + min(avail, max(0, v.maxUnav-g.unavailable(v, nil)-v.leaving))
	}
	held := g.in.Hold != nil || due != "" || (g.in.RollingBack && !v.restored())
	if plan.Step != nil && plan.Step.WaitingFor != v1alpha1.StepWaitDone {
		// The step's share caps the batch (checkSteps); a step that waits
		// holds it.
		if plan.Step.WaitingFor != v1alpha1.StepWaitPods {
			held = true
		} else if room := int(plan.Step.Target) - g.done(views); room < want {
			want = room
		}
	}
	if wait := g.batchWait(); wait > 0 {
		if !held && avail+notAvail > 0 && (plan.RequeueAfter == 0 || plan.RequeueAfter > wait) {
			return fmt.Errorf("within batchInterval: RequeueAfter = %v, want (0, %v]", plan.RequeueAfter, wait)
		}
		want = 0
	}
	if held {
		want = 0
	}
	var err error
	if stop, until := g.intentsStop(v.name); want > 0 && stop {
		if plan.Reason != v1alpha1.ReasonWaitingForDisruption {
			return fmt.Errorf("%s stopped by intents %+v: reason %s, want %s", v.name, g.in.Intents, plan.Reason, v1alpha1.ReasonWaitingForDisruption)
		}
		if until > 0 && (plan.RequeueAfter <= 0 || plan.RequeueAfter > until) {
			return fmt.Errorf("%s stopped by intents expiring within %v: RequeueAfter = %v", v.name, until, plan.RequeueAfter)
		}
		want = 0
	} else if want, err = g.budgetAllows(plan, v.name, want); err != nil {
		return err
	}
	if len(plan.Delete) != want {
		return fmt.Errorf("%s: deletes %d pods %v, want %d (maxUnavailable %d)", v.name, len(plan.Delete), podNames(plan.Delete), want, v.maxUnav)
	}
	return nil
}

// nameOrdinal is the ordinal a pod's name ends with, read without the
// code under test.
func nameOrdinal(name string) int {
	o, _ := strconv.Atoi(name[strings.LastIndex(name, "-")+1:])
	return o
}

func ordinalOf(live map[int]*corev1.Pod, p *corev1.Pod) int {
	for o, lp := range live {
		if lp == p {
			return o
		}
	}
	return -1
}

// checkMinReadyRequeue: a wanted pod that is Ready but not yet available makes
// the plan look again no later than when it becomes available.
func (g fuzzGroup) checkMinReadyRequeue(plan Plan, views []memberView) error {
	var soonest time.Duration
	for _, v := range views {
		for _, p := range v.live {
			if since, ok := oracleReadySince(p); ok && !g.available(p) {
				d := since.Add(time.Duration(g.in.MinReadySeconds) * time.Second).Sub(testNow)
				if soonest == 0 || d < soonest {
					soonest = d
				}
			}
		}
	}
	if soonest > 0 && (plan.RequeueAfter == 0 || plan.RequeueAfter > soonest) {
		return fmt.Errorf("a pod becomes available in %v, RequeueAfter = %v", soonest, plan.RequeueAfter)
	}
	return nil
}

// checkDeletionOrder: an OnDelete member's available pods go highest ordinal
// first, after every not-available one, and deleting never takes its
// not-available and leaving pods above maxUnavailable.
func (g fuzzGroup) checkDeletionOrder(plan Plan, c memberView, deleted sets.Set[*corev1.Pod]) error {
	cur := &c
	// Available pods go highest ordinal first, after every not-available one.
	var availableOrds []int
	for i, p := range plan.Delete {
		if !g.available(p) {
			if len(availableOrds) > 0 {
				return fmt.Errorf("deletes not-available %s after available pods: %v", p.Name, podNames(plan.Delete))
			}
			continue
		}
		o := ordinalOf(cur.live, p)
		if i > 0 && len(availableOrds) > 0 && o > availableOrds[len(availableOrds)-1] {
			return fmt.Errorf("available pods not deleted highest ordinal first: %v", podNames(plan.Delete))
		}
		availableOrds = append(availableOrds, o)
	}
	if len(availableOrds) > 0 {
		lowest := availableOrds[len(availableOrds)-1]
		for o, p := range cur.live {
			if o > lowest && podRevision(p) != cur.updateRev && g.available(p) && !deleted.Has(p) {
				return fmt.Errorf("deletes %v but keeps the higher outdated %s", podNames(plan.Delete), p.Name)
			}
		}
	}
	// (c) deleting available pods never takes the member's not-available and
	// leaving pods above maxUnavailable.
	before, after := g.unavailable(*cur, nil)+cur.leaving, g.unavailable(*cur, deleted)+cur.leaving
	if after > max(cur.maxUnav, before) {
		return fmt.Errorf("%s: %d unavailable or leaving after deleting (%d before), maxUnavailable %d", cur.name, after, before, cur.maxUnav)
	}
	return nil
}

// releasable are the pods the oracle expects a partitioned member to release
// now: its live outdated pods below the partition, highest ordinal first, as
// long as the available ones fit in what maxUnavailable leaves after its
// not-available, leaving and already released pods.
func (g fuzzGroup) releasable(v memberView) []*corev1.Pod {
	allowed := max(0, v.maxUnav-g.unavailable(v, nil)-v.leaving)
	if g.released(v, v.partition) > allowed {
		return nil // more released than allowed: the partition is raised first
	}
	budget := allowed - g.released(v, v.partition)
	var out []*corev1.Pod
	for _, p := range outdatedBelow(v, v.start+v.partition) {
		cost := 0
		if g.available(p) {
			cost = 1
		}
		if cost > budget {
			break
		}
		budget -= cost
		out = append(out, p)
	}
	return out
}

// partitionAfter is the partition the plan leaves member v at.
func partitionAfter(plan Plan, v memberView) (int, bool) {
	for _, c := range plan.PartitionChanges() {
		if c.Member == v.name {
			if int(c.From) != v.partition {
				return 0, false
			}
			return int(c.To), c.Release
		}
	}
	return v.partition, false
}

// checkRelease: a partitioned member's batch is exactly the outdated live
// pods its lowered partition releases, the next ones below the partition,
// and releasing never takes its not-available, leaving and released pods
// above maxUnavailable.
func (g fuzzGroup) checkRelease(plan Plan, cur memberView) error {
	to, release := partitionAfter(plan, cur)
	if !release || to >= cur.partition {
		return fmt.Errorf("%s: batch %v without lowering the partition from %d (to %d, release %v)", cur.name, podNames(plan.Delete), cur.partition, to, release)
	}
	var want []string
	for _, p := range outdatedBelow(cur, cur.start+cur.partition) {
		if ordinalOf(cur.live, p) >= cur.start+to {
			want = append(want, p.Name)
		}
	}
	if !slices.Equal(podNames(plan.Delete), want) {
		return fmt.Errorf("%s: partition %d -> %d releases %v, batch %v", cur.name, cur.partition, to, want, podNames(plan.Delete))
	}
	if p := cur.live[cur.start+to]; p == nil || podRevision(p) == cur.updateRev {
		return fmt.Errorf("%s: partition lowered to %d, which is no outdated pod's ordinal", cur.name, to)
	}
	before := g.unavailable(cur, nil) + cur.leaving + g.released(cur, cur.partition)
	after := g.unavailable(cur, nil) + cur.leaving + g.released(cur, to)
	if after > max(cur.maxUnav, before) {
		return fmt.Errorf("%s: %d unavailable, leaving or released after lowering the partition to %d (%d before), maxUnavailable %d",
			cur.name, after, to, before, cur.maxUnav)
	}
	return nil
}

// checkPartitions: the partition of a member that is not being rolled, or
// that the group stops, is raised over every live outdated pod (nothing
// rolls that Echelon did not release), the member being rolled keeps no more
// released than maxUnavailable allows, a complete member is held at its
// replicas, and only a release lowers a partition. A blocked or unsettled
// group's partitions are left alone.
func (g fuzzGroup) checkPartitions(plan Plan, views []memberView) error {
	if _, reason := g.firstBlocker(); reason != "" || !g.settled() {
		if c := plan.PartitionChanges(); len(c) > 0 {
			return fmt.Errorf("blocked or unsettled group changes partitions %+v", c)
		}
		return nil
	}
	for _, v := range views {
		if !v.partitioned {
			continue
		}
		stop := g.in.Paused || (g.in.Hold != nil && g.in.Hold.Stop) || (g.in.RollingBack && !v.restored())
		to, release := partitionAfter(plan, v)
		if to < v.partition && !release {
			return fmt.Errorf("%s: partition lowered from %d to %d without a batch", v.name, v.partition, to)
		}
		avail, notAvail := g.outdated(v)
		switch {
		case avail+notAvail == 0 && v.currentRev == v.updateRev && g.updated(v) == len(v.live) && !slices.ContainsFunc(g.in.Members, func(m Member) bool {
			return m.Name == v.name && slices.ContainsFunc(m.Pods, func(p *corev1.Pod) bool { return g.terminating(p) && podRevision(p) != v.updateRev })
		}):
			if to < v.replicas {
				return fmt.Errorf("%s: complete on revision %s, partition %d below its %d replicas", v.name, v.updateRev, to, v.replicas)
			}
		case v.name == plan.Current && !stop:
			if r := g.released(v, to); r > 0 && g.unavailable(v, nil)+v.leaving+r > max(v.maxUnav, g.unavailable(v, nil)+v.leaving) {
				return fmt.Errorf("%s: partition %d leaves %d released with %d unavailable, maxUnavailable %d", v.name, to, r, g.unavailable(v, nil), v.maxUnav)
			}
		default:
			if left := outdatedBelow(v, v.start+v.replicas); len(left) > 0 && ordinalOf(v.live, left[0]) >= v.start+to {
				return fmt.Errorf("%s: not being rolled (current %q, stop %v), partition %d leaves outdated %s to the StatefulSet controller", v.name, plan.Current, stop, to, left[0].Name)
			}
		}
	}
	return nil
}

// done counts the group's wanted pods not waiting to be rolled: all but the
// live outdated pods (of a partitioned member, those below its partition).
func (g fuzzGroup) done(views []memberView) int {
	n := 0
	for _, v := range views {
		n += v.replicas
		for o, p := range v.live {
			if podRevision(p) != v.updateRev && (!v.partitioned || o < v.start+v.partition) {
				n--
			}
		}
	}
	return n
}

// checkSteps: a batch never takes the group past the share of the step it
// is at, a step waiting for its pause, a promote or its pods deletes
// nothing, and the rollout never goes past a pause without a duration
// unless promoted, and then past one only.
func (g fuzzGroup) checkSteps(plan Plan, views []memberView) error {
	s := g.in.Steps
	if s == nil || g.in.RollingBack || !g.settled() {
		if plan.Step != nil && (s == nil || g.in.RollingBack) {
			return fmt.Errorf("Step = %+v without steps (or rolling back)", *plan.Step)
		}
		return nil
	}
	if _, reason := g.firstBlocker(); reason != "" {
		return nil
	}
	st := plan.Step
	if st == nil {
		return fmt.Errorf("no Step with %d steps", len(s.Steps))
	}
	if st.Index < s.Index {
		return fmt.Errorf("step went back from %d to %d", s.Index, st.Index)
	}
	done := g.done(views)
	promotes := 0
	for i := s.Index; i < min(st.Index, int32(len(s.Steps))); i++ {
		if p := s.Steps[i].Pause; p != nil && p.Duration == nil {
			promotes++
		}
	}
	total := 0
	for _, v := range views {
		total += v.replicas
	}
	if (promotes > 1 || (promotes == 1 && !s.Promoted)) && !(st.WaitingFor == v1alpha1.StepWaitDone && done == total) {
		return fmt.Errorf("went past %d pauses waiting for a promote from step %d to %d (promoted %v)", promotes, s.Index, st.Index, s.Promoted)
	}
	if len(plan.Delete) > 0 && st.WaitingFor != v1alpha1.StepWaitDone {
		if st.WaitingFor != v1alpha1.StepWaitPods {
			return fmt.Errorf("deletes %v while step %d waits for %s", podNames(plan.Delete), st.Index, st.WaitingFor)
		}
		if done+len(plan.Delete) > int(st.Target) {
			return fmt.Errorf("deletes %v with %d done: past step %d's %d pods", podNames(plan.Delete), done, st.Index, st.Target)
		}
	}
	return nil
}
