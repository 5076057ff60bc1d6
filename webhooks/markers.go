package webhooks

// The webhook configurations `make manifests` writes to
// config/webhook/manifests.yaml; the Helm chart's templates mirror them.
// failurePolicy: a downscale rule must hold while the operator is down, so
// the two downscale webhooks fail closed; the cross-object rules are also
// reported by the controllers, so their webhook fails open. sideEffects:
// NoneOnDryRun, since a denial records an Event (and prepare-downscale calls
// pods), neither of which a dry run does. The namespaceSelector leaves out
// kube-system and the operator's namespace, where the operator's own
// Deployment must stay updatable while no replica serves.
//
// The eviction webhook fails closed too, on purpose: a zone budget matters
// most while the operator is down, since that is when nodes are drained (a
// cluster upgrade drains the operator's node as well), and failing open
// would let a drain take two zones at that moment. While no replica
// answers, evictions in the selected namespaces are refused: `kubectl
// drain` stops with the error and is run again, autoscalers retry. The
// operator's namespace is left out, so its own pods can always be evicted
// and rescheduled; two replicas and the chart's PodDisruptionBudget keep one
// answering through a drain. An objectSelector cannot narrow it to covered
// pods: the API server matches it against the Eviction, which has no
// labels, not against the pod. The chart can narrow the namespaces
// (webhooks.eviction.namespaceSelector), choose Ignore, or leave the webhook
// out (webhooks.eviction.enabled).
//
// +kubebuilder:webhookconfiguration:mutating=false,name=echelon
// +kubebuilder:webhookconfiguration:mutating=true,name=echelon
// +kubebuilder:webhook:path=/admission/no-downscale,mutating=false,failurePolicy=fail,sideEffects=NoneOnDryRun,groups=apps,resources=statefulsets;statefulsets/scale;deployments;deployments/scale;replicasets;replicasets/scale,verbs=update,versions=v1,name=no-downscale.echelon.dev,admissionReviewVersions=v1,matchPolicy=Equivalent,timeoutSeconds=10,serviceName=echelon-webhook,serviceNamespace=echelon-system,patch=`{"namespaceSelector":{"matchExpressions":[{"key":"kubernetes.io/metadata.name","operator":"NotIn","values":["kube-system","echelon-system"]}]}}`
// +kubebuilder:webhook:path=/admission/prepare-downscale,mutating=true,failurePolicy=fail,sideEffects=NoneOnDryRun,groups=apps,resources=statefulsets;statefulsets/scale,verbs=update,versions=v1,name=prepare-downscale.echelon.dev,admissionReviewVersions=v1,matchPolicy=Equivalent,timeoutSeconds=10,reinvocationPolicy=Never,serviceName=echelon-webhook,serviceNamespace=echelon-system,patch=`{"namespaceSelector":{"matchExpressions":[{"key":"kubernetes.io/metadata.name","operator":"NotIn","values":["kube-system","echelon-system"]}]}}`
// +kubebuilder:webhook:path=/admission/validate,mutating=false,failurePolicy=ignore,sideEffects=NoneOnDryRun,groups=echelon.dev,resources=rolloutgroups;scalingpolicies;delayeddownscales;zonedisruptionbudgets,verbs=create;update,versions=v1alpha1,name=validate.echelon.dev,admissionReviewVersions=v1,matchPolicy=Equivalent,timeoutSeconds=10,serviceName=echelon-webhook,serviceNamespace=echelon-system,patch=`{"namespaceSelector":{"matchExpressions":[{"key":"kubernetes.io/metadata.name","operator":"NotIn","values":["kube-system","echelon-system"]}]}}`
// +kubebuilder:webhook:path=/admission/eviction,mutating=false,failurePolicy=fail,sideEffects=NoneOnDryRun,groups="",resources=pods/eviction,verbs=create,versions=v1,name=eviction.echelon.dev,admissionReviewVersions=v1,matchPolicy=Equivalent,timeoutSeconds=10,serviceName=echelon-webhook,serviceNamespace=echelon-system,patch=`{"namespaceSelector":{"matchExpressions":[{"key":"kubernetes.io/metadata.name","operator":"NotIn","values":["kube-system","echelon-system"]}]}}`
