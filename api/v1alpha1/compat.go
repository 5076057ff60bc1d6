package v1alpha1

// GrafanaCompatLabel marks the RolloutGroups, ScalingPolicies and
// DelayedDownscales that the operator keeps, with --grafana-compat, from the
// Grafana rollout-operator's labels and annotations. A resource without it
// that claims the same StatefulSet takes their place.
const GrafanaCompatLabel = "echelon.dev/grafana-compat"
