package render

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// DelayedDownscaleView is a DelayedDownscale read at Now.
type DelayedDownscaleView struct {
	Delayed *v1alpha1.DelayedDownscale
	Now     time.Time
}

// DelayedDownscale writes the delayed downscale: what it waits for, how far
// the target may shrink now, and each prepared pod with when it became
// prepared and when it becomes eligible.
func DelayedDownscale(w io.Writer, v DelayedDownscaleView, s Style) error {
	dd := v.Delayed
	st := dd.Status
	var b strings.Builder
	field := header(&b, s, dd.Name, dd.Namespace, string(st.Phase), conditionReason(st.Conditions, v1alpha1.DelayedConditionReady))
	field("Target", "StatefulSet "+dd.Spec.TargetRef.Name)
	field("Delay", dd.Spec.Delay+" prepared before a pod may be removed")
	replicas := fmt.Sprintf("%d now, %s desired", st.Replicas, optional(st.DesiredReplicas))
	if st.EligibleReplicas != nil {
		replicas += fmt.Sprintf(", may shrink to %d now", *st.EligibleReplicas)
	}
	field("Replicas", replicas)
	wait := st.Message
	switch {
	case st.Phase == "":
		wait = "the operator to report a status (is it running and watching this namespace?)"
	case st.Phase == v1alpha1.DelayedPhaseIdle:
		wait = "nothing: " + wait
	}
	if st.EarliestDownscaleTime != nil {
		wait += fmt.Sprintf("; next pod eligible %s (%s)", ago(v.Now, st.EarliestDownscaleTime.Time), stamp(st.EarliestDownscaleTime.Time))
	}
	field("Waiting for", wait)
	if len(st.PreparedPods) > 0 {
		b.WriteString("\n")
		rows := [][]cell{{plain("POD"), plain("STATE"), plain("PREPARED"), plain("ELIGIBLE"), plain("ERROR")}}
		for _, p := range st.PreparedPods {
			state, prepared, eligible := "Preparing", "asked, no answer yet", "-"
			if p.PreparedAt != nil {
				state, prepared = "Waiting", ago(v.Now, p.PreparedAt.Time)
			}
			if p.EligibleAt != nil {
				eligible = fmt.Sprintf("%s (%s)", ago(v.Now, p.EligibleAt.Time), stamp(p.EligibleAt.Time))
				if !v.Now.Before(p.EligibleAt.Time) {
					state = "Eligible"
				}
			}
			if p.Error != "" {
				state, prepared = "Errored", "-"
			}
			rows = append(rows, []cell{plain(p.Name), {text: state, paint: s.Phase}, plain(prepared), plain(eligible), plain(p.Error)})
		}
		for _, line := range table(rows) {
			b.WriteString(line)
			b.WriteString("\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
