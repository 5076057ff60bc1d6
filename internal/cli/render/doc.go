// Package render draws what kubectl-echelon shows: a RolloutGroup as a tree of
// its members and their pods, a ScalingPolicy, a DelayedDownscale, and a
// dry-run plan. It is pure: it takes the objects already read and a time, and
// writes text, so that golden files pin every layout without a cluster.
package render
