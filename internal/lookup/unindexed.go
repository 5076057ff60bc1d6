package lookup

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Unindexed is a client whose List serves the cache's index fields
// (client.MatchingFields on an index Register adds) without an index: it lists
// with the other options and keeps the objects the index function maps to the
// value. It lets code written against the operator's cache read the API server
// directly, as the kubectl plugin's dry runs do, at the cost of a full list.
type Unindexed struct {
	client.Client
}

// List lists into list, serving one index field selector by filtering.
func (u Unindexed) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	if lo.FieldSelector == nil || lo.FieldSelector.Empty() {
		return u.Client.List(ctx, list, opts...)
	}
	reqs := lo.FieldSelector.Requirements()
	if len(reqs) != 1 {
		return fmt.Errorf("list with field selector %q: one index field at a time", lo.FieldSelector)
	}
	field, value := reqs[0].Field, reqs[0].Value
	i := slices.IndexFunc(indexes, func(ix fieldIndex) bool { return ix.name == field })
	if i < 0 {
		return u.Client.List(ctx, list, opts...) // a real field: the API server serves it
	}
	unfiltered := *lo
	unfiltered.FieldSelector = nil
	if err := u.Client.List(ctx, list, &unfiltered); err != nil {
		return err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return err
	}
	kept := make([]runtime.Object, 0, len(items))
	for _, item := range items {
		if o, ok := item.(client.Object); ok && slices.Contains(indexes[i].fn(o), value) {
			kept = append(kept, item)
		}
	}
	return meta.SetList(list, kept)
}
