// Package patch writes the reconcilers' status: once per pass, only what
// changed.
package patch

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Status writes next over written, the status the API server holds, as a
// merge patch of obj's status subresource: only what changed is sent, and
// nothing when nothing changed. setStatus puts a status into a copy of obj.
func Status[O client.Object, S any](ctx context.Context, c client.StatusClient, obj O, written, next S, setStatus func(O, S)) error {
	if equality.Semantic.DeepEqual(written, next) {
		return nil
	}
	base := obj.DeepCopyObject().(O)
	setStatus(base, written)
	patched := obj.DeepCopyObject().(O)
	setStatus(patched, next)
	if err := c.Status().Patch(ctx, patched, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("patch the status of %s: %w", obj.GetName(), err)
	}
	return nil
}
