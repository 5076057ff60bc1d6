/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

// Package builders makes the objects Echelon's tests work on — StatefulSets,
// their pods, RolloutGroups, ScalingPolicies, DelayedDownscales and zone
// budgets — with fluent wrappers in the manner of Kueue's pkg/util/testing:
//
//	sts := builders.MakeStatefulSet(ns, "ingester-zone-a").Replicas(3).OnDelete().Revision("r2").Obj()
//	pod := builders.MakePod(ns, "ingester-zone-a", 0).ControlledBy(sts).Revision("r1").Obj()
//
// It is an ordinary package, not a _test file, so that unit, controller and
// end-to-end tests build their objects the same way. Wrappers only build:
// they never talk to an API server. Obj returns a deep copy, so one wrapper
// can make several independent objects.
package builders
