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
// +kubebuilder:webhookconfiguration:mutating=false,name=echelon
// +kubebuilder:webhookconfiguration:mutating=true,name=echelon
// +kubebuilder:webhook:path=/admission/no-downscale,mutating=false,failurePolicy=fail,sideEffects=NoneOnDryRun,groups=apps,resources=statefulsets;statefulsets/scale;deployments;deployments/scale;replicasets;replicasets/scale,verbs=update,versions=v1,name=no-downscale.echelon.dev,admissionReviewVersions=v1,matchPolicy=Equivalent,timeoutSeconds=10,serviceName=echelon-webhook,serviceNamespace=echelon-system,patch=`{"namespaceSelector":{"matchExpressions":[{"key":"kubernetes.io/metadata.name","operator":"NotIn","values":["kube-system","echelon-system"]}]}}`
// +kubebuilder:webhook:path=/admission/prepare-downscale,mutating=true,failurePolicy=fail,sideEffects=NoneOnDryRun,groups=apps,resources=statefulsets;statefulsets/scale,verbs=update,versions=v1,name=prepare-downscale.echelon.dev,admissionReviewVersions=v1,matchPolicy=Equivalent,timeoutSeconds=10,reinvocationPolicy=Never,serviceName=echelon-webhook,serviceNamespace=echelon-system,patch=`{"namespaceSelector":{"matchExpressions":[{"key":"kubernetes.io/metadata.name","operator":"NotIn","values":["kube-system","echelon-system"]}]}}`
// +kubebuilder:webhook:path=/admission/validate,mutating=false,failurePolicy=ignore,sideEffects=NoneOnDryRun,groups=echelon.dev,resources=rolloutgroups;scalingpolicies;delayeddownscales,verbs=create;update,versions=v1alpha1,name=validate.echelon.dev,admissionReviewVersions=v1,matchPolicy=Equivalent,timeoutSeconds=10,serviceName=echelon-webhook,serviceNamespace=echelon-system,patch=`{"namespaceSelector":{"matchExpressions":[{"key":"kubernetes.io/metadata.name","operator":"NotIn","values":["kube-system","echelon-system"]}]}}`
