// Package delayed decides, without any client or network, which pods a
// DelayedDownscale calls and how far its StatefulSet may shrink. The controller
// observes the target, its pods and its ScalingPolicy's desired replicas, asks
// Calls which pods to call, makes the calls, and asks Decide for the outcome.
//
// The protocol is the Grafana rollout-operator's delayed downscale: POST to a
// pod's prepare endpoint prepares it and answers {"timestamp": <unix seconds>},
// since when it has been prepared; DELETE cancels. The StatefulSet may shrink
// past a pod only once that pod, and every pod above it, has been prepared for
// at least the delay.
package delayed

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/echelon-operator/echelon/internal/podname"
)

// MaxClockSkew is how far in the future a pod's timestamp may be before it is
// taken as an error: a pod whose clock runs ahead would otherwise become
// eligible early.
const MaxClockSkew = time.Minute

// RetryAfterError is how soon pods that answered with an error are called again.
const RetryAfterError = 10 * time.Second

// Pod is one pod of the target, by ordinal.
type Pod struct {
	Name    string
	UID     string
	Ordinal int
	// AddressError says why the pod cannot be called (no IP yet, no service).
	AddressError string
}

// Record is what is known of a pod asked to prepare: from its last answer, or
// from status when it was not called this pass.
type Record struct {
	Name string
	// UID is the pod's UID when it was asked. A record of another UID speaks
	// of a pod since recreated under the same name, which is not prepared.
	UID        string
	PreparedAt time.Time
	// Err is the pod's failed answer; PreparedAt is then meaningless.
	Err string
}

// asked reports whether the record only says the pod is being asked: written
// before the call, it has no answer yet.
func (r Record) asked() bool { return r.PreparedAt.IsZero() && r.Err == "" }

// current reports whether the record speaks of the pod as it is now.
func (r Record) current(pod Pod) bool { return r.UID == pod.UID }

// MaxCancelBackoff bounds the wait between two DELETEs to a pod whose cancel
// failed.
const MaxCancelBackoff = 5 * time.Minute

// CancelRetry is a pod whose DELETE failed: it may still be prepared.
type CancelRetry struct {
	Name, UID string
	// Attempts counts the failed DELETEs; Err is the last one's error.
	Attempts int32
	Err      string
	// Next is when the pod is told again.
	Next time.Time
}

// Input is what the planner looks at.
type Input struct {
	Now   time.Time
	Delay time.Duration
	// Desired is the ScalingPolicy's desired replicas; nil when no policy
	// targets the StatefulSet.
	Desired *int32
	// Current is the target's spec.replicas.
	Current int32
	// Pods are the target's pods that exist, by name.
	Pods map[string]Pod
	// Previous are the records of the last pass (from status).
	Previous []Record
	// EarliestEligible is when the next pod was to become eligible (from status).
	EarliestEligible time.Time
	// NamePrefix is the StatefulSet's name: pods are "<name>-<ordinal>".
	NamePrefix string
	// OrdinalStart is the StatefulSet's spec.ordinals.start: its pods are
	// ordinals [OrdinalStart, OrdinalStart+Current).
	OrdinalStart int32
	// Cancelling are the pods whose DELETE failed (from status).
	Cancelling []CancelRetry
}

// pending reports whether a downscale is pending: desired below current.
func (in Input) pending() bool { return in.Desired != nil && *in.Desired < in.Current }

// removed returns the names of the pods a pending downscale removes, highest
// ordinal first.
func (in Input) removed() []string {
	if !in.pending() {
		return nil
	}
	lo, hi := podname.Removed(in.OrdinalStart, in.Current, *in.Desired)
	var names []string
	for ord := hi - 1; ord >= lo; ord-- {
		names = append(names, fmt.Sprintf("%s-%d", in.NamePrefix, ord))
	}
	return names
}

// stays reports whether a pod of this ordinal remains at the given replicas.
func (in Input) stays(ordinal int, replicas int32) bool {
	_, hi := podname.Kept(in.OrdinalStart, replicas)
	return ordinal < hi
}

// CallPlan says which pods to call now.
type CallPlan struct {
	// Prepare are the pods to POST to.
	Prepare []string
	// Cancel are the pods to DELETE: pods no longer to be removed, or every pod
	// once no downscale is pending.
	Cancel []string
}

// Calls decides which pods to call. Pods are called only when something
// changed: the set of pods to remove (all of them are asked, and the pods that
// stay get DELETE), a pod that answered with an error, that was recreated since
// its record (another UID) or whose call never answered (a restart during the
// calls): those pods again; or a pod reaching its eligibility (all of them, to
// confirm before the StatefulSet may shrink past them). Otherwise no pod is
// called.
//
// Cancelling goes only to pods that stay: below the current replicas when no
// downscale is pending, below the desired replicas while one is. A pod being
// removed keeps its preparation to the end. A pod whose DELETE failed is told
// again once its backoff is over (in.Cancelling, Retries).
func Calls(in Input) CallPlan {
	p := calls(in)
	for _, name := range dueCancels(in) {
		if !slices.Contains(p.Cancel, name) {
			p.Cancel = append(p.Cancel, name)
		}
	}
	slices.Sort(p.Cancel)
	return p
}

// calls is Calls without the retries of failed cancels.
func calls(in Input) CallPlan {
	var p CallPlan
	removed := in.removed()
	previous := map[string]Record{}
	for _, r := range in.Previous {
		previous[r.Name] = r
	}
	if !in.pending() {
		if len(in.Previous) > 0 {
			// Every pod that stays, not only those recorded: a pod prepared
			// before a restart that lost the record must not stay prepared.
			for name, pod := range in.Pods {
				if in.stays(pod.Ordinal, in.Current) {
					p.Cancel = append(p.Cancel, name)
				}
			}
			slices.Sort(p.Cancel)
		}
		return p
	}
	for _, r := range in.Previous {
		if pod, exists := in.Pods[r.Name]; exists && !slices.Contains(removed, r.Name) && in.stays(pod.Ordinal, *in.Desired) {
			p.Cancel = append(p.Cancel, r.Name)
		}
	}
	changed := len(in.Previous) != len(removed)
	var again []string
	for _, name := range removed {
		r, ok := previous[name]
		changed = changed || !ok
		if pod, exists := in.Pods[name]; ok && (r.Err != "" || r.asked() || (exists && !r.current(pod))) {
			again = append(again, name)
		}
	}
	becameEligible := !in.EarliestEligible.IsZero() && !in.Now.Before(in.EarliestEligible)
	switch {
	case changed || becameEligible:
		p.Prepare = removed
	case len(again) > 0:
		p.Prepare = again
	}
	return p
}

// Intent is what status must say before the calls of plan are made: the
// records of the pods asked to prepare that status does not hold yet for
// their current UID, as asked and not answered. Written first, it lets a
// restart that lost the answers still cancel every pod that may have
// prepared (Calls cancels every pod that stays once status has records).
// Nil when status already names every pod asked.
func Intent(in Input, plan CallPlan) map[string]Record {
	previous := map[string]Record{}
	for _, r := range in.Previous {
		previous[r.Name] = r
	}
	var intent map[string]Record
	for _, name := range plan.Prepare {
		pod, exists := in.Pods[name]
		if r, ok := previous[name]; !exists || (ok && r.current(pod)) {
			continue
		}
		if intent == nil {
			intent = map[string]Record{}
		}
		intent[name] = Record{Name: name, UID: pod.UID}
	}
	return intent
}

// Cancelling is the records status holds of the pods plan tells to cancel.
// The status written before the calls (Intent) keeps them: a restart before
// the DELETEs then still sends them, since Calls cancels only the pods that
// stay among those status names while a downscale is pending.
func Cancelling(in Input, plan CallPlan) []Record {
	var records []Record
	for _, r := range in.Previous {
		if slices.Contains(plan.Cancel, r.Name) {
			records = append(records, r)
		}
	}
	return records
}

// Plan is the outcome of a pass.
type Plan struct {
	// Records are the pods to remove with what is known of each, highest
	// ordinal first.
	Records []Record
	// Eligible is how far the StatefulSet may shrink now; nil when no downscale
	// is pending.
	Eligible *int32
	// EarliestEligible is when the next pod becomes eligible; zero when none waits.
	EarliestEligible time.Time
	// Errors describe the pods whose answers hold the downscale.
	Errors []string
	// RequeueAfter is when to look again: the next eligibility, or a retry.
	RequeueAfter time.Duration
	// Pending is true when a downscale is pending.
	Pending bool
	// NoPolicy is true when no ScalingPolicy gives the desired replicas.
	NoPolicy bool
	// Cancelling are the pods whose DELETE failed, to tell again (Retries);
	// the controller sets them from the answers to its calls.
	Cancelling []CancelRetry
}

// Decide works out, from the answers of this pass (by pod name) and the
// records of the last one, how far the StatefulSet may shrink. It never lets it
// shrink past a pod that has not been prepared for the delay, whatever is above
// it: eligibility runs from the highest ordinal down and stops at the first pod
// that is not eligible.
func Decide(in Input, answers map[string]Record) Plan {
	p := Plan{Pending: in.pending(), NoPolicy: in.Desired == nil}
	if !p.Pending {
		return p
	}
	previous := map[string]Record{}
	for _, r := range in.Previous {
		previous[r.Name] = r
	}
	eligible := in.Current
	open := true // still walking down through eligible pods
	for _, name := range in.removed() {
		r, answered := answers[name]
		if !answered {
			r = previous[name]
			r.Name = name
		}
		if pod, exists := in.Pods[name]; exists && r.Err == "" && r.asked() && r.current(pod) {
			// Asked, no answer yet: neither eligible nor an error.
			p.Records = append(p.Records, r)
			open = false
			continue
		}
		if r.Err == "" {
			r.Err = validate(in, name, r)
		}
		p.Records = append(p.Records, r)
		if r.Err != "" {
			p.Errors = append(p.Errors, name+": "+r.Err)
			open = false
			continue
		}
		at := r.PreparedAt.Add(in.Delay)
		if open && !in.Now.Before(at) {
			eligible--
			continue
		}
		open = false
		// Only a time still ahead tells when the decision changes: a lower pod
		// already past its delay waits for the higher ones, not for a clock.
		if in.Now.Before(at) && (p.EarliestEligible.IsZero() || at.Before(p.EarliestEligible)) {
			p.EarliestEligible = at
		}
	}
	p.Eligible = &eligible
	if !p.EarliestEligible.IsZero() {
		p.RequeueAfter = p.EarliestEligible.Sub(in.Now)
	}
	if len(p.Errors) > 0 && (p.RequeueAfter == 0 || p.RequeueAfter > RetryAfterError) {
		p.RequeueAfter = RetryAfterError
	}
	return p
}

// validate says what is wrong with a record, or "".
func validate(in Input, name string, r Record) string {
	pod, exists := in.Pods[name]
	switch {
	case !exists:
		return "the pod does not exist, so it cannot be prepared"
	case pod.AddressError != "":
		return pod.AddressError
	case !r.current(pod):
		return "the pod was recreated since it was prepared (its UID changed): it is asked again"
	case r.PreparedAt.IsZero():
		return "not prepared yet"
	case r.PreparedAt.Unix() == 0:
		return "answered a zero timestamp"
	case r.PreparedAt.After(in.Now.Add(MaxClockSkew)):
		return fmt.Sprintf("answered a timestamp %s in the future (%s): its clock may be ahead",
			r.PreparedAt.Sub(in.Now).Round(time.Second), r.PreparedAt.UTC().Format(time.RFC3339))
	}
	return ""
}

// Summary is one line naming the pods in error.
func (p Plan) Summary() string { return strings.Join(p.Errors, "; ") }

// Retries is what status keeps of the cancels after the calls of plan:
// a pod whose DELETE failed (failed, by pod name) is told again after
// CancelBackoff of its attempts; a retry not yet due is kept as it was; a pod
// that answered, is gone, was recreated (its new self is not prepared) or is
// to be removed again (it is asked to prepare anyway) is dropped.
func Retries(in Input, plan CallPlan, failed map[string]string) []CancelRetry {
	removed := in.removed()
	var out []CancelRetry
	kept := map[string]bool{}
	for _, name := range plan.Cancel {
		err, ok := failed[name]
		pod, exists := in.Pods[name]
		if !ok || !exists {
			continue
		}
		r := CancelRetry{Name: name, UID: pod.UID, Attempts: 1, Err: err}
		if i := slices.IndexFunc(in.Cancelling, func(c CancelRetry) bool { return c.Name == name && c.UID == pod.UID }); i >= 0 {
			r.Attempts = in.Cancelling[i].Attempts + 1
		}
		r.Next = in.Now.Add(CancelBackoff(r.Attempts))
		out = append(out, r)
		kept[name] = true
	}
	for _, c := range in.Cancelling {
		pod, exists := in.Pods[c.Name]
		if kept[c.Name] || slices.Contains(plan.Cancel, c.Name) || !exists || pod.UID != c.UID || slices.Contains(removed, c.Name) {
			continue
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b CancelRetry) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// dueCancels are the pods of in.Cancelling to tell again now: due, and
// still the pod that may be prepared.
func dueCancels(in Input) []string {
	removed := in.removed()
	var names []string
	for _, c := range in.Cancelling {
		if pod, exists := in.Pods[c.Name]; exists && pod.UID == c.UID && !in.Now.Before(c.Next) && !slices.Contains(removed, c.Name) {
			names = append(names, c.Name)
		}
	}
	return names
}

// RetryAfter is how long until the first of retries is due; 0 for none.
func RetryAfter(retries []CancelRetry, now time.Time) time.Duration {
	var after time.Duration
	for _, r := range retries {
		d := max(r.Next.Sub(now), time.Millisecond)
		if after == 0 || d < after {
			after = d
		}
	}
	return after
}

// CancelBackoff is the wait after a pod's attempts-th failed DELETE:
// RetryAfterError, doubled on each further failure, at most
// MaxCancelBackoff.
func CancelBackoff(attempts int32) time.Duration {
	d := RetryAfterError
	for i := int32(1); i < attempts && d < MaxCancelBackoff; i++ {
		d *= 2
	}
	return min(d, MaxCancelBackoff)
}
