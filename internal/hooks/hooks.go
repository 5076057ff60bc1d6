// Package hooks decides and makes the HTTP calls Echelon sends around the
// disruptions it causes: to each pod before it is removed (with the reason:
// rollout, rotation, downscale or eviction), and before and after each member
// of a RolloutGroup rolls. Settings, the retry schedule, the payloads and the
// verdict on a batch of calls are pure functions; Caller makes the calls.
package hooks

import (
	"net/url"
	"slices"
	"time"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// Names of the hooks, as metrics and Events name them.
const (
	BeforePodRemoval = "beforePodRemoval"
	BeforeMember     = "beforeMember"
	AfterMember      = "afterMember"
)

// Defaults of a hook's policy, as the CRD defaults them; they apply to
// objects that bypassed defaulting.
const (
	DefaultTimeout = 5 * time.Second
	MaxTimeout     = 30 * time.Second
	DefaultRetries = 2
	MaxRetries     = 5
	// FirstBackoff is the wait before the first retry; each next wait doubles.
	FirstBackoff = 500 * time.Millisecond
	// EvictionBudget bounds every hook call an eviction admission makes,
	// retries included: the API server gives the webhook 10 s, and the
	// answer (allow or refuse) must come before.
	EvictionBudget = 5 * time.Second
)

// Settings are a hook's policy with defaults applied.
type Settings struct {
	Timeout       time.Duration
	Retries       int
	FailurePolicy v1alpha1.HookFailurePolicy
}

// SettingsOf resolves a hook's policy: timeout 5s (at most 30s), 2 retries
// (at most 5), failurePolicy Fail.
func SettingsOf(p v1alpha1.HookPolicy) Settings {
	s := Settings{Timeout: DefaultTimeout, Retries: DefaultRetries, FailurePolicy: v1alpha1.HookFail}
	if p.Timeout != nil && p.Timeout.Duration > 0 {
		s.Timeout = min(p.Timeout.Duration, MaxTimeout)
	}
	if p.Retries != nil {
		s.Retries = min(max(int(*p.Retries), 0), MaxRetries)
	}
	if p.FailurePolicy != "" {
		s.FailurePolicy = p.FailurePolicy
	}
	return s
}

// RetrySchedule is the wait before each retry: 0.5s, 1s, 2s, 4s, 8s.
func RetrySchedule(retries int) []time.Duration {
	out := make([]time.Duration, 0, retries)
	wait := FirstBackoff
	for range retries {
		out = append(out, wait)
		wait *= 2
	}
	return out
}

// WorstCase is the longest a call of these settings can take, retries and
// their waits included: what one hook can add to a reconcile.
func WorstCase(s Settings) time.Duration {
	total := time.Duration(s.Retries+1) * s.Timeout
	for _, w := range RetrySchedule(s.Retries) {
		total += w
	}
	return total
}

// Within shortens the settings so that a call, retries included, fits in
// budget: fewer retries first, then a shorter timeout. The eviction webhook
// uses it.
func Within(s Settings, budget time.Duration) Settings {
	for s.Retries > 0 && WorstCase(s) > budget {
		s.Retries--
	}
	if s.Timeout > budget {
		s.Timeout = budget
	}
	return s
}

// Applies reports whether a pod-removal hook is called for reason: for every
// reason when the hook lists none.
func Applies(h *v1alpha1.PodRemovalHook, reason v1alpha1.RemovalReason) bool {
	if h == nil {
		return false
	}
	return len(h.Reasons) == 0 || slices.Contains(h.Reasons, reason)
}

// RemovalPayload is the JSON body of a pod-removal call; the same facts are
// in the URL's query, for endpoints that read no body. Version 1.
type RemovalPayload struct {
	Reason    v1alpha1.RemovalReason `json:"reason"`
	Pod       string                 `json:"pod"`
	Namespace string                 `json:"namespace"`
	// Group is the RolloutGroup the pod belongs to, empty for none.
	Group string `json:"group,omitempty"`
	// Member is the pod's StatefulSet.
	Member string `json:"member"`
	// Revision is the revision the pod is replaced by (rollout), or its own.
	Revision string `json:"revision,omitempty"`
	// RolloutID is the group's spec.rolloutId, as notifications and the
	// completion callback carry it; empty when the group sets none.
	RolloutID string `json:"rolloutId,omitempty"`
}

// RemovalURL is the endpoint's URL on the pod at host, with the payload's
// reason, pod and group in the query.
func RemovalURL(ep v1alpha1.PrepareEndpoint, host string, p RemovalPayload) string {
	u, err := url.Parse(ep.URL(host))
	if err != nil {
		return ep.URL(host)
	}
	q := u.Query()
	q.Set("reason", string(p.Reason))
	q.Set("pod", p.Pod)
	if p.Group != "" {
		q.Set("group", p.Group)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// MemberPayload is the JSON body of a member hook's call. Version 1.
type MemberPayload struct {
	// Hook is beforeMember or afterMember.
	Hook      string `json:"hook"`
	Namespace string `json:"namespace"`
	Group     string `json:"group"`
	Member    string `json:"member"`
	Revision  string `json:"revision"`
	// RolloutID is the group's spec.rolloutId, empty when it sets none.
	RolloutID string `json:"rolloutId,omitempty"`
}

// Verdict is what a batch of calls lets the caller do.
type Verdict struct {
	// Proceed are the keys (pods, members) whose removal or start may go on:
	// their call succeeded, or failed under failurePolicy Ignore.
	Proceed []string
	// Held are the keys whose call failed under failurePolicy Fail, with the
	// error of each.
	Held map[string]string
	// Ignored are the keys whose call failed under Ignore, with the error.
	Ignored map[string]string
}

// Decide judges the calls of keys (in order): errs holds the error of each
// failed call (a key absent or nil succeeded).
func Decide(policy v1alpha1.HookFailurePolicy, keys []string, errs map[string]error) Verdict {
	v := Verdict{Held: map[string]string{}, Ignored: map[string]string{}}
	for _, k := range keys {
		err := errs[k]
		switch {
		case err == nil:
			v.Proceed = append(v.Proceed, k)
		case policy == v1alpha1.HookIgnore:
			v.Proceed = append(v.Proceed, k)
			v.Ignored[k] = err.Error()
		default:
			v.Held[k] = err.Error()
		}
	}
	return v
}
