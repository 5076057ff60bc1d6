package notification

import (
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

func equalStatus(a, b *v1alpha1.NotificationStatus) bool {
	return equality.Semantic.DeepEqual(a, b)
}

func withGeneration(c metav1.Condition, gen int64) metav1.Condition {
	c.ObservedGeneration = gen
	return c
}
