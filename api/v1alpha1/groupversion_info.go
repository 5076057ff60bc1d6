// Package v1alpha1 contains the echelon.dev/v1alpha1 API: RolloutGroup, and the
// resources that share its group.
// +kubebuilder:object:generate=true
// +groupName=echelon.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the API group and version of every Echelon resource.
	GroupVersion = schema.GroupVersion{Group: "echelon.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the Echelon types with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the Echelon types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
