// Package lookup is what the controllers and the admission webhooks both know
// about the cluster: the cache indexes (registered once, by Register), which
// RolloutGroups claim a StatefulSet, a group's members, which ScalingPolicies
// and DelayedDownscales name a target, and the field manager of Echelon's own
// downscales. Both read the manager's cache through these functions, so a
// webhook and a controller never disagree about which policy guards a target
// or which group a StatefulSet belongs to.
package lookup
