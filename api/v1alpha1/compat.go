package v1alpha1

// GrafanaCompatLabel marks the RolloutGroups, ScalingPolicies and
// DelayedDownscales that the operator keeps, with --grafana-compat, from the
// Grafana rollout-operator's labels and annotations. A resource without it
// that claims the same StatefulSet takes their place.
const GrafanaCompatLabel = "echelon.dev/grafana-compat"

// GrafanaCompatAppliedAnnotation holds, on each resource compat mode made, a
// digest of what it last applied: compat mode writes the resource again
// only when its translation differs from that, or the resource no longer
// holds it (someone edited a field compat mode sets).
const GrafanaCompatAppliedAnnotation = "echelon.dev/grafana-compat-applied"
