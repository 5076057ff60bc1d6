// Package controllers wires Echelon's reconcilers into a manager. Each lives
// in a package of its own (rolloutgroup, notification, scalingpolicy,
// delayeddownscale, zonedisruptionbudget, volumeresize) with
// the same files: controller.go (Reconcile), observe.go (reads into the
// planner's input), status.go (client-free status), watches.go (map functions,
// predicates, SetupWithManager). Each observes the cluster through the
// manager's caches, asks a pure planner what to do, acts, and writes status
// once.
package controllers

import (
	"context"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/controllers/delayeddownscale"
	"github.com/echelon-operator/echelon/controllers/notification"
	"github.com/echelon-operator/echelon/controllers/rolloutgroup"
	"github.com/echelon-operator/echelon/controllers/scalingpolicy"
	"github.com/echelon-operator/echelon/controllers/volumeresize"
	"github.com/echelon-operator/echelon/controllers/zonedisruptionbudget"
	"github.com/echelon-operator/echelon/internal/budget"
	"github.com/echelon-operator/echelon/internal/lookup"
	"github.com/echelon-operator/echelon/internal/podcall"
)

// Setup registers Echelon's controllers with the manager, with the cache
// indexes they and the webhooks share; addressing says how pods are called
// over HTTP, tlsObjects reads the Secrets and ConfigMaps of tls blocks (the
// process's httptls.Objects; nil reads them live).
func Setup(mgr ctrl.Manager, addressing podcall.Addressing, tlsObjects client.Reader) error {
	if err := lookup.Register(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return err
	}
	fresh, err := budget.NewFreshness(mgr.GetCache())
	if err != nil {
		return err
	}
	if err := rolloutgroup.New(mgr).WithAddressing(addressing).WithTLSObjects(tlsObjects).WithFreshness(fresh).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the RolloutGroup controller: %w", err)
	}
	if err := rolloutgroup.NewMemberLabeler(mgr).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the RolloutGroup member label controller: %w", err)
	}
	if err := notification.Setup(mgr); err != nil {
		return fmt.Errorf("set up the notification controller: %w", err)
	}
	if err := scalingpolicy.New(mgr).WithAddressing(addressing).WithTLSObjects(tlsObjects).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the ScalingPolicy controller: %w", err)
	}
	if err := delayeddownscale.New(mgr, addressing).WithTLSObjects(tlsObjects).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the DelayedDownscale controller: %w", err)
	}
	if err := volumeresize.New(mgr).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the volume resize controller: %w", err)
	}
	if err := zonedisruptionbudget.New(mgr).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the ZoneDisruptionBudget controller: %w", err)
	}
	return nil
}
