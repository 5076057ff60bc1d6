package analysis

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// Defaults of a check's settings, as the CRD defaults them; they apply to
// objects that bypassed defaulting.
const (
	DefaultInterval         = 10 * time.Second
	MinInterval             = time.Second
	DefaultSuccessThreshold = 1
	DefaultFailureThreshold = 1
	DefaultErrorThreshold   = 3
	// maxErrorLength bounds lastError in status.
	maxErrorLength = 1024
)

// Settings are a check's timing and thresholds with defaults applied.
type Settings struct {
	InitialDelay     time.Duration
	Interval         time.Duration
	SuccessThreshold int32
	FailureThreshold int32
	ErrorThreshold   int32
}

// SettingsOf resolves a check's settings.
func SettingsOf(c v1alpha1.AnalysisCheck) Settings {
	s := Settings{
		Interval:         DefaultInterval,
		SuccessThreshold: max(c.SuccessThreshold, 1),
		FailureThreshold: max(c.FailureThreshold, 1),
		ErrorThreshold:   max(c.ErrorThreshold, 1),
	}
	if c.SuccessThreshold == 0 {
		s.SuccessThreshold = DefaultSuccessThreshold
	}
	if c.FailureThreshold == 0 {
		s.FailureThreshold = DefaultFailureThreshold
	}
	if c.ErrorThreshold == 0 {
		s.ErrorThreshold = DefaultErrorThreshold
	}
	if c.InitialDelay != nil && c.InitialDelay.Duration > 0 {
		s.InitialDelay = c.InitialDelay.Duration
	}
	if c.Interval != nil {
		s.Interval = max(c.Interval.Duration, MinInterval)
	}
	return s
}

// GateOf is the gate a check runs at; AfterMember when unset.
func GateOf(c v1alpha1.AnalysisCheck) v1alpha1.AnalysisGate {
	if c.Gate == "" {
		return v1alpha1.GateAfterMember
	}
	return c.Gate
}

// Outcome is the result of one query of a check.
type Outcome struct {
	// Query is the PromQL sent, after expansion.
	Query string
	// Verdict is the result judged against the condition, when Err is nil.
	Verdict Verdict
	// Err is a query error: Prometheus unreachable, an HTTP error, bad PromQL,
	// refused credentials, a timeout, a template or condition that cannot be
	// applied. Errors are counted apart from failures.
	Err error
}

// NewCheckStatus is a check's record at the opening of a gate.
func NewCheckStatus(name string) v1alpha1.CheckStatus {
	return v1alpha1.CheckStatus{Name: name, Phase: v1alpha1.CheckPending}
}

// NextQuery is when a check of a gate whose clock started at gateStart is to be
// queried next: initialDelay after the start for the first query, then interval
// after the previous one. A check that failed or errored is not queried again
// (ok is false): its gate has failed.
func NextQuery(s Settings, st v1alpha1.CheckStatus, gateStart time.Time) (at time.Time, ok bool) {
	switch st.Phase {
	case v1alpha1.CheckFailed, v1alpha1.CheckErrored:
		return time.Time{}, false
	}
	if st.LastTime == nil || st.LastTime.Time.Before(gateStart) {
		return gateStart.Add(s.InitialDelay), true
	}
	return st.LastTime.Add(s.Interval), true
}

// Due reports whether the check is to be queried at now.
func Due(s Settings, st v1alpha1.CheckStatus, gateStart, now time.Time) bool {
	at, ok := NextQuery(s, st, gateStart)
	return ok && !now.Before(at)
}

// Record counts one outcome. A success or a failure resets the count of
// errors and the opposite count; an error changes neither the successes nor
// the failures, so a flaky Prometheus neither passes nor fails a check, and
// neither restarts a long analysis: only errorThreshold errors in a row fail it.
func Record(s Settings, st v1alpha1.CheckStatus, o Outcome, now time.Time) v1alpha1.CheckStatus {
	t := metav1.NewTime(now)
	st.LastTime = &t
	st.Query = o.Query
	switch {
	case o.Err != nil:
		st.ConsecutiveErrors++
		st.LastError = truncate(o.Err.Error(), maxErrorLength)
	case o.Verdict.Success:
		st.ConsecutiveSuccesses++
		st.ConsecutiveFailures, st.ConsecutiveErrors = 0, 0
		st.LastValue, st.LastError = o.Verdict.Value, ""
	default:
		st.ConsecutiveFailures++
		st.ConsecutiveSuccesses, st.ConsecutiveErrors = 0, 0
		st.LastValue, st.LastError = o.Verdict.Value, ""
	}
	st.Phase = PhaseOf(s, st)
	return st
}

// PhaseOf derives a check's phase from its counts.
func PhaseOf(s Settings, st v1alpha1.CheckStatus) v1alpha1.CheckPhase {
	switch {
	case st.ConsecutiveFailures >= s.FailureThreshold:
		return v1alpha1.CheckFailed
	case st.ConsecutiveErrors >= s.ErrorThreshold:
		return v1alpha1.CheckErrored
	case st.ConsecutiveSuccesses >= s.SuccessThreshold:
		return v1alpha1.CheckPassed
	case st.LastTime != nil:
		return v1alpha1.CheckRunning
	}
	return v1alpha1.CheckPending
}

// Explain says why a failed or errored check failed its gate, naming the
// check, its value or error and its threshold.
func Explain(c v1alpha1.AnalysisCheck, st v1alpha1.CheckStatus) string {
	s := SettingsOf(c)
	switch st.Phase {
	case v1alpha1.CheckFailed:
		return fmt.Sprintf("check %s failed: value %s does not meet %q (%d consecutive failures, failureThreshold %d)",
			c.Name, st.LastValue, DescribeCondition(c.Condition), st.ConsecutiveFailures, s.FailureThreshold)
	case v1alpha1.CheckErrored:
		return fmt.Sprintf("check %s: %d consecutive query errors (errorThreshold %d), last: %s",
			c.Name, st.ConsecutiveErrors, s.ErrorThreshold, st.LastError)
	}
	return fmt.Sprintf("check %s is %s", c.Name, st.Phase)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
