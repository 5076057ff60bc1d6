/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

// Package nodetier runs the test control plane with one real node instead of
// kwok's fake ones: Debian's containerd and runc, and the kubelet and
// kube-proxy built from the same pinned k8s.io/kubernetes module as the
// control plane (`make test-assets`), so that the operator runs as the Helm
// chart deploys it: its image from `make image`, its ServiceAccount token, its
// probes, its read-only root, its webhook and metrics Services.
//
// Everything lives in a network namespace the run creates (Main): the control
// plane, containerd, the kubelet, kube-proxy and the pods behind a bridge. No
// address outside it is used, nothing routes out, nothing is masqueraded.
// Main tears the run down when the tests end, and the next run sweeps what a
// killed one left: processes, mounts, cgroups, the namespace, the kernel
// settings the kubelet changes, and the files it writes outside its scratch
// directory. Where the tier cannot run (not root, no cgroups, the packages or
// binaries missing) Main prints one line saying why and passes.
//
// A Ginkgo suite:
//
//	func TestMain(m *testing.M) { os.Exit(nodetier.Main(m)) }
//
// and in BeforeSuite node, err := nodetier.Start(ctx, nodetier.Options{}).
package nodetier
