/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

// Package installed runs Echelon as an installation made it: the Helm chart or
// dist/install.yaml creates a Deployment on the test control plane, whose kwok
// nodes run no containers, so this package runs the echelon binary as a local
// process with that Deployment's arguments and environment and its
// ServiceAccount's token. Nothing routes the webhook Service either, so the
// process serves the admission webhooks on a loopback port and the
// installation's webhook configurations are pointed at it by URL
// (RouteWebhooks). A rollout then proves that what the install created
// (flags, RBAC, leader election Lease, webhooks) lets the operator work, and
// GuardDownscales that the API server calls its webhooks. The package also
// holds the small workloads those tests roll out, and a role aggregation
// controller for tests of aggregated ClusterRoles.
package installed

import "time"

// stopGrace is how long a process may take to exit after SIGTERM; the
// operator releases its Lease and exits in well under a second.
const stopGrace = 15 * time.Second
