package gate

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/rollout/gate/gatetest"
)

// The manual controls act once per annotation value.
func TestAnalysisControls(t *testing.T) {
	failedGate := &v1alpha1.GateStatus{Member: "a", Kind: v1alpha1.GateAfterMember, Revision: "r2", StartTime: ptr.To(metav1.NewTime(at(-time.Hour)))}
	pendingGate := &v1alpha1.GateStatus{Member: "a", Kind: v1alpha1.GateAfterMember, Revision: "r2", StartTime: ptr.To(metav1.NewTime(at(-time.Minute)))}
	failed := &v1alpha1.AnalysisFailure{Reason: v1alpha1.ReasonAnalysisFailed, Check: "zone", Message: "check zone failed", Gate: failedGate}
	// The plan was made before the controls acted: a's gate is due.
	plan := gatetest.Plan(gatetest.Member("a", 3, 3), gatetest.Member("b", 0, 3))
	plan.GateDue = "a"
	tests := []struct {
		name        string
		annotations map[string]string
		// rolloutID is spec.rolloutId; observedID status.rolloutId.
		rolloutID, observedID string
		status                v1alpha1.AnalysisStatus
		check                 func(t *testing.T, ap *Pass)
		wantEvent             string
		wantMessage           string
	}{{
		name: "retry evaluates a failed gate again from the start", annotations: map[string]string{v1alpha1.AnnotationRetry: "1"},
		status: v1alpha1.AnalysisStatus{Failure: failed, Checks: []v1alpha1.CheckStatus{{Name: "zone", Phase: v1alpha1.CheckFailed, ConsecutiveFailures: 1}}},
		check: func(t *testing.T, ap *Pass) {
			g := ap.st.Gate
			if ap.st.Failure != nil || g == nil || g.Member != "a" || !g.StartTime.Time.Equal(testNow) ||
				len(ap.st.Checks) != 1 || ap.st.Checks[0].Phase != v1alpha1.CheckPending || ap.st.HandledRetry != "1" {
				t.Errorf("after retry: %+v", ap.st)
			}
		},
		wantEvent: "RetryRequested", wantMessage: "evaluated again from the start",
	}, {
		name: "retry after a rollback clears it", annotations: map[string]string{v1alpha1.AnnotationRetry: "1"},
		status: v1alpha1.AnalysisStatus{Failure: failed, Rollback: &v1alpha1.RollbackStatus{CompletionTime: ptr.To(metav1.NewTime(testNow))}},
		check: func(t *testing.T, ap *Pass) {
			if ap.st.Failure != nil || ap.st.Rollback != nil {
				t.Errorf("after retry: %+v", ap.st)
			}
		},
		wantEvent: "RetryRequested", wantMessage: "templates as they are now",
	}, {
		name: "a value already acted on is not acted on again", annotations: map[string]string{v1alpha1.AnnotationRetry: "1"},
		status: v1alpha1.AnalysisStatus{Failure: failed, HandledRetry: "1"},
		check: func(t *testing.T, ap *Pass) {
			if ap.st.Failure == nil {
				t.Error("the failure was cleared again")
			}
		},
	}, {
		name: "retry without a failure does nothing", annotations: map[string]string{v1alpha1.AnnotationRetry: "2"},
		check: func(t *testing.T, ap *Pass) {
			if ap.st.HandledRetry != "2" {
				t.Errorf("handledRetry %q", ap.st.HandledRetry)
			}
		},
		wantEvent: "RetryRequested", wantMessage: "nothing to retry",
	}, {
		name: "skip passes the pending gate", annotations: map[string]string{v1alpha1.AnnotationSkipGate: "x"},
		status: v1alpha1.AnalysisStatus{Gate: pendingGate},
		check: func(t *testing.T, ap *Pass) {
			if ap.st.Gate != nil || ap.gatePassed["a"] != "r2" || ap.st.HandledSkip != "x" {
				t.Errorf("after skip: %+v, gatePassed %v", ap.st, ap.gatePassed)
			}
		},
		wantEvent: "GateSkipped", wantMessage: "passed by hand",
	}, {
		name: "skip passes a failed gate that holds the group", annotations: map[string]string{v1alpha1.AnnotationSkipGate: "x"},
		status: v1alpha1.AnalysisStatus{Failure: failed},
		check: func(t *testing.T, ap *Pass) {
			if ap.st.Failure != nil || ap.gatePassed["a"] != "r2" {
				t.Errorf("after skip: %+v, gatePassed %v", ap.st, ap.gatePassed)
			}
		},
		wantEvent: "GateSkipped", wantMessage: "the rollout goes on",
	}, {
		name: "skip with no gate does nothing", annotations: map[string]string{v1alpha1.AnnotationSkipGate: "x"},
		wantEvent: "GateSkipped", wantMessage: "nothing skipped",
	}, {
		name: "abort rolls back whatever onFailure says", annotations: map[string]string{v1alpha1.AnnotationAbort: "now"},
		status: v1alpha1.AnalysisStatus{Gate: pendingGate},
		check: func(t *testing.T, ap *Pass) {
			f, rb := ap.st.Failure, ap.st.Rollback
			if f == nil || f.Reason != v1alpha1.ReasonAborted || rb == nil || len(rb.Members) != 2 || ap.st.Gate != nil || ap.rollbackStarted != v1alpha1.ReasonAborted {
				t.Errorf("after abort: failure %+v rollback %+v gate %+v", f, rb, ap.st.Gate)
			}
		},
		wantEvent: "AbortRequested", wantMessage: "echelon.dev/abort=now: rolling back",
	}, {
		name: "abort while rolling back does nothing more", annotations: map[string]string{v1alpha1.AnnotationAbort: "again"},
		status:    v1alpha1.AnalysisStatus{Failure: failed, Rollback: &v1alpha1.RollbackStatus{}},
		wantEvent: "AbortRequested", wantMessage: "already rolling back",
	}, {
		name: "a new rolloutId retries a failed gate", rolloutID: "deploy-2", observedID: "deploy-1",
		status: v1alpha1.AnalysisStatus{Failure: failed},
		check: func(t *testing.T, ap *Pass) {
			if ap.st.Failure != nil || ap.st.Gate == nil {
				t.Errorf("after a new rolloutId: %+v", ap.st)
			}
		},
		wantEvent: "RetryRequested", wantMessage: "spec.rolloutId=deploy-2: ",
	}, {
		name: "a new rolloutId clears a rollback", rolloutID: "deploy-2",
		status: v1alpha1.AnalysisStatus{Failure: failed, Rollback: &v1alpha1.RollbackStatus{CompletionTime: ptr.To(metav1.NewTime(testNow))}},
		check: func(t *testing.T, ap *Pass) {
			if ap.st.Failure != nil || ap.st.Rollback != nil {
				t.Errorf("after a new rolloutId: %+v", ap.st)
			}
		},
		wantEvent: "RetryRequested", wantMessage: "templates as they are now",
	}, {
		name: "the rolloutId already acted on does not retry", rolloutID: "deploy-1", observedID: "deploy-1",
		status: v1alpha1.AnalysisStatus{Failure: failed},
		check: func(t *testing.T, ap *Pass) {
			if ap.st.Failure == nil {
				t.Error("the failure was cleared")
			}
		},
	}, {
		name: "a new rolloutId without a failure does nothing", rolloutID: "deploy-3", observedID: "deploy-2",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rg := gatetest.Group(0, v1alpha1.FailurePause, func(rg *v1alpha1.RolloutGroup) {
				rg.Annotations = tt.annotations
				rg.Status.Analysis = tt.status.DeepCopy()
				rg.Spec.RolloutID, rg.Status.RolloutID = tt.rolloutID, tt.observedID
			})
			ap := New(rg, testNow)
			ap.Begin(plan)
			if tt.check != nil {
				tt.check(t, ap)
			}
			switch {
			case tt.wantEvent == "" && len(ap.events) > 0:
				t.Errorf("events %+v, want none", ap.events)
			case tt.wantEvent != "":
				if len(ap.events) == 0 || ap.events[0].Reason != tt.wantEvent || !strings.Contains(ap.events[0].Message, tt.wantMessage) {
					t.Errorf("events %+v, want first %s saying %q", ap.events, tt.wantEvent, tt.wantMessage)
				}
			}
		})
	}
}
