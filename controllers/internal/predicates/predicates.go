// Package predicates builds the watch predicates of the reconcilers: each
// says which updates of one kind change what its planner reads.
package predicates

import (
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// UpdatedWhen passes every creation, deletion and generic event, and the
// updates of a T for which changed(old, new) holds. An update whose objects
// are not both T passes: it is not this predicate's to judge.
func UpdatedWhen[T client.Object](changed func(old, new T) bool) predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, okOld := e.ObjectOld.(T)
		n, okNew := e.ObjectNew.(T)
		return !okOld || !okNew || changed(o, n)
	}}
}

// NoGeneric drops generic events from p: they come only from channel
// sources, which the watch p guards has none of.
func NoGeneric(p predicate.Funcs) predicate.Funcs {
	p.GenericFunc = func(event.GenericEvent) bool { return false }
	return p
}
