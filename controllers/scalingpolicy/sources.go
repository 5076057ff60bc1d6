package scalingpolicy

import (
	"context"
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// sourceWatches starts, the first time a ScalingPolicy reads a resource of a
// kind, a metadata-only watch of that kind, so that a change of the resource's
// replicas (which bumps its generation) wakes the policies that follow it. The
// kinds are not known when the operator starts: any resource with a scale
// subresource may be a source.
type sourceWatches struct {
	cache      cache.Cache
	controller controller.Controller
	mapper     handler.MapFunc

	mu      sync.Mutex
	watched map[schema.GroupVersionKind]bool
}

// watch starts the watch of gvk unless it runs already. The operator needs
// list and watch on the resource, besides get on its scale subresource.
func (s *sourceWatches) watch(_ context.Context, gvk schema.GroupVersionKind) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.watched[gvk] || s.controller == nil {
		return nil
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(gvk)
	src := source.Kind(s.cache, client.Object(obj), handler.EnqueueRequestsFromMapFunc(s.mapper),
		predicate.GenerationChangedPredicate{})
	if err := s.controller.Watch(src); err != nil {
		return fmt.Errorf("watch %s: %w", gvk, err)
	}
	s.watched[gvk] = true
	return nil
}
