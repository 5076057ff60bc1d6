package gate

import (
	"testing"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

func TestAnalysisChangedIsUrgent(t *testing.T) {
	base := &v1alpha1.AnalysisStatus{Checks: []v1alpha1.CheckStatus{{Name: "c", Phase: v1alpha1.CheckRunning, ConsecutiveSuccesses: 1}}}
	counted := base.DeepCopy()
	counted.Checks[0].ConsecutiveSuccesses, counted.Checks[0].LastValue = 2, "0.1"
	passed := counted.DeepCopy()
	passed.Checks[0].Phase = v1alpha1.CheckPassed
	gated := base.DeepCopy()
	gated.Gate = &v1alpha1.GateStatus{Member: "a"}
	tests := []struct {
		name string
		w, n *v1alpha1.AnalysisStatus
		want bool
	}{
		{"counts wait", base, counted, false},
		{"a check's phase is urgent", counted, passed, true},
		{"a gate is urgent", base, gated, true},
		{"appearing is urgent", nil, base, true},
		{"nothing", nil, nil, false},
	}
	for _, tt := range tests {
		if got := Changed(tt.w, tt.n); got != tt.want {
			t.Errorf("%s: Changed = %v, want %v", tt.name, got, tt.want)
		}
	}
}
