/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

// Package controlplane runs a real, throw-away Kubernetes control plane for
// integration tests, e2e tests, benchmarks and `make demo`: etcd and
// kube-apiserver (through controller-runtime's envtest), kube-controller-manager,
// kube-scheduler and kwok, which plays the kubelet of a few fake nodes so that
// pods are scheduled, get an IP on the loopback network (127.1.x.y) and become
// Running and Ready.
//
// The binaries come from `make test-assets` (see FindAssets). Every control plane
// lives in its own temporary directory with its own ports, so several can run side
// by side, and its processes die with the test binary even when it is killed.
//
// A typical Go test:
//
//	cp := controlplane.StartForTest(t, controlplane.Options{CRDDirs: []string{controlplane.CRDBasesDir}})
//	ns := cp.NewNamespace(t)
//	c := cp.Client()
//
// and a Ginkgo suite starts one in BeforeSuite with Start, stops it in
// AfterSuite, and prints cp.LogTails when a spec fails.
package controlplane
