package webhooks

import (
	"context"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/internal/budget"
	"github.com/echelon-operator/echelon/internal/disruption"
)

// +kubebuilder:rbac:groups=echelon.dev,resources=rolloutgroups,verbs=get
// +kubebuilder:rbac:groups=echelon.dev,resources=rolloutgroups/status,verbs=patch

// DownscaleBudget is the disruption budget of RolloutGroups as the
// prepare-downscale webhook asks it about a downscale of a member: on the
// API server, never on the cache alone, since two admissions run at the same
// moment and neither sees the other in a cache.
type DownscaleBudget interface {
	// AcquireDownscale judges req, a downscale of a member of the group, and
	// unless dryRun records the group's hold when it is allowed.
	AcquireDownscale(ctx context.Context, group client.ObjectKey, req disruption.Request, dryRun bool) (disruption.Verdict, error)
}

// liveBudget is the operator's DownscaleBudget: budget.AcquireDownscale,
// the one the ScalingPolicy controller applies to its own downscales.
type liveBudget struct {
	client client.Client
	live   client.Reader
	now    func() time.Time
}

// NewDownscaleBudget returns the operator's DownscaleBudget: it reads
// through live (the manager's API reader) and writes holds through c.
func NewDownscaleBudget(c client.Client, live client.Reader) DownscaleBudget {
	return &liveBudget{client: c, live: live, now: time.Now}
}

func (b *liveBudget) AcquireDownscale(ctx context.Context, group client.ObjectKey, req disruption.Request, dryRun bool) (disruption.Verdict, error) {
	return budget.AcquireDownscale(ctx, b.client, b.live, group, req, dryRun, b.now)
}
