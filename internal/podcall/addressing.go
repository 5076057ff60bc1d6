package podcall

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// Addressing says how the operator reaches pods over HTTP.
type Addressing struct {
	// PodAddressIP calls pods on their IP instead of their DNS name.
	PodAddressIP bool
	// ClusterDomain ends pod DNS names: <pod>.<service>.<namespace>.svc.<domain>.
	ClusterDomain string
}

// Host is how a pod of a StatefulSet whose spec.serviceName is service is
// reached: its DNS name through that headless Service (the default), or its
// IP (--pod-address=ip). why says why it cannot be reached yet.
func (a Addressing) Host(pod *corev1.Pod, service string) (host, why string) {
	if a.PodAddressIP {
		if pod.Status.PodIP == "" {
			return "", "the pod has no IP yet"
		}
		return pod.Status.PodIP, ""
	}
	if service == "" {
		return "", "the StatefulSet has no spec.serviceName, so its pods have no DNS name (use --pod-address=ip)"
	}
	return fmt.Sprintf("%s.%s.%s.svc.%s", pod.Name, service, pod.Namespace, a.ClusterDomain), ""
}
