package budget

import (
	"context"
	"reflect"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FirstRead is a reader for Acquire whose first Get of the holder is
// answered by known (when set and of the same kind and key), with no
// request, and every other read by live. known is the holder as the caller
// last saw it: the newer of its cache's copy and its own last write. The
// intent is written with known's resourceVersion, so a copy that was not
// the latest costs only a Conflict and a live read; and the view a decision
// is made on is read after it, so no recorded pod is judged on a view older
// than its record.
func FirstRead(live client.Reader, known client.Object) client.Reader {
	return &firstRead{Reader: live, first: known}
}

// firstRead answers its first Get with first (when set), and every other
// read from Reader.
type firstRead struct {
	client.Reader
	first client.Object
}

func (r *firstRead) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	first := r.first
	r.first = nil
	if first == nil || reflect.ValueOf(first).IsNil() || reflect.TypeOf(first) != reflect.TypeOf(obj) ||
		first.GetName() != key.Name || first.GetNamespace() != key.Namespace {
		return r.Reader.Get(ctx, key, obj, opts...)
	}
	reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(first.DeepCopyObject()).Elem())
	return nil
}
