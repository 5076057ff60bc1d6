package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	// StepIndex is the step of spec.steps a group's rollout is at.
	StepIndex = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "echelon_rolloutgroup_step",
		Help: "The step of spec.steps the group's rollout is at, from 0; the number of steps once past the last.",
	}, []string{labelNamespace, labelGroup})

	// StepWaitingForPromote is 1 while a group's step waits for a promote.
	StepWaitingForPromote = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "echelon_rolloutgroup_step_waiting_for_promote",
		Help: "1 while the group's rollout waits at a step of spec.steps for the echelon.dev/promote annotation, else 0.",
	}, []string{labelNamespace, labelGroup})

	// Promotes counts the promotes acted on.
	Promotes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "echelon_rolloutgroup_promotes_total",
		Help: "Pauses of spec.steps ended by the echelon.dev/promote annotation.",
	}, []string{labelNamespace, labelGroup})
)

func init() {
	crmetrics.Registry.MustRegister(StepIndex, StepWaitingForPromote, Promotes)
}

func forgetSteps(labels prometheus.Labels) {
	StepIndex.DeletePartialMatch(labels)
	StepWaitingForPromote.DeletePartialMatch(labels)
	Promotes.DeletePartialMatch(labels)
}
