package webhooks

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/internal/disruption"
)

// fakeBudget answers the prepare-downscale webhook's questions to a
// RolloutGroup's disruption budget with a fixed answer (then, when set,
// from the second question on), and records them.
type fakeBudget struct {
	mu     sync.Mutex
	answer disruption.Verdict
	then   *disruption.Verdict
	err    error
	asked  []string
}

func allowingBudget() *fakeBudget { return &fakeBudget{answer: disruption.Verdict{Allowed: true}} }

func (b *fakeBudget) AcquireDownscale(_ context.Context, group client.ObjectKey, req disruption.Request, dryRun bool) (disruption.Verdict, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	// -n: the downscale removes n ordinals, named in req.Pods.
	ask := fmt.Sprintf("%s %s %s -%d by %q", group.Name, req.Reason, req.Zone, len(req.Pods), req.Holder)
	if dryRun {
		ask += " dry-run"
	}
	b.asked = append(b.asked, ask)
	if b.then != nil && len(b.asked) > 1 {
		return *b.then, b.err
	}
	return b.answer, b.err
}

// questions are what the webhook asked, one a line.
func (b *fakeBudget) questions() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.asked, "\n")
}
