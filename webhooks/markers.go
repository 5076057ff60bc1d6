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
// The no-downscale and prepare-downscale webhooks act on a lower
// spec.replicas only: a matchCondition keeps every other write (a
// partition lowered or raised by a rollout, a template change, an upscale)
// from reaching them, so a rollout's partition writes pay for no webhook
// call. The condition reads an unset spec.replicas as 0, as a Scale that
// omits replicas 0 means; a StatefulSet, Deployment or ReplicaSet reaches
// admission with its default applied.
//
// The hold-partition webhook raises the partition of a StatefulSet whose
// partition a RolloutGroup holds to its replicas in the same write that
// changes its template (HoldPartition says why). Its reach is kept to such
// writes: an objectSelector on v1alpha1.PartitionHolderLabel, which the
// RolloutGroup controller sets on the members it holds, and a
// matchCondition on a changed spec.template; a rollout's own partition
// writes never reach it. It fails open: while no replica answers, the
// eviction and downscale webhooks refuse every other disruption and no
// rollout runs, so a member the StatefulSet controller rolls on its own is
// the only one disrupted; failing closed would block every `helm upgrade`
// of a member while the operator is down.
//
// The downscale-budget webhook judges a lowered spec.replicas of a
// RolloutGroup's member with the group's disruption budget, and records its
// intent. Its reach is kept to what it judges, so that an operator that is
// down or failing cannot block writes to anything else: on statefulsets, an
// objectSelector on the member label (v1alpha1.MemberLabel, which the
// RolloutGroup controller keeps on every member) and a matchCondition that
// lets only a lower spec.replicas through; upscales, template changes and
// every other write never reach it. On statefulsets/scale the API server
// matches an objectSelector against the Scale, which has no labels, so a
// selector would leave `kubectl scale` and autoscalers unjudged: that rule
// has the matchCondition only (a lower spec.replicas of the Scale, which
// omits replicas 0) and reaches every StatefulSet downscale through /scale
// in the selected namespaces; the webhook answers a non-member's from its
// cache without asking the budget. Fail by default, like the other
// downscale rules: a budget matters most while the operator is down.
//
// +kubebuilder:webhookconfiguration:mutating=false,name=echelon
// +kubebuilder:webhookconfiguration:mutating=true,name=echelon
// +kubebuilder:webhook:path=/admission/no-downscale,mutating=false,failurePolicy=fail,sideEffects=NoneOnDryRun,groups=apps,resources=statefulsets;statefulsets/scale;deployments;deployments/scale;replicasets;replicasets/scale,verbs=update,versions=v1,name=no-downscale.echelon.dev,admissionReviewVersions=v1,matchPolicy=Equivalent,timeoutSeconds=10,serviceName=echelon-webhook,serviceNamespace=echelon-system,patch=`{"namespaceSelector":{"matchExpressions":[{"key":"kubernetes.io/metadata.name","operator":"NotIn","values":["kube-system","echelon-system"]}]},"matchConditions":[{"name":"lowers-replicas","expression":"(has(object.spec.replicas) ? object.spec.replicas : 0) < (has(oldObject.spec.replicas) ? oldObject.spec.replicas : 0)"}]}`
// +kubebuilder:webhook:path=/admission/prepare-downscale,mutating=true,failurePolicy=fail,sideEffects=NoneOnDryRun,groups=apps,resources=statefulsets;statefulsets/scale,verbs=update,versions=v1,name=prepare-downscale.echelon.dev,admissionReviewVersions=v1,matchPolicy=Equivalent,timeoutSeconds=10,reinvocationPolicy=Never,serviceName=echelon-webhook,serviceNamespace=echelon-system,patch=`{"namespaceSelector":{"matchExpressions":[{"key":"kubernetes.io/metadata.name","operator":"NotIn","values":["kube-system","echelon-system"]}]},"matchConditions":[{"name":"lowers-replicas","expression":"(has(object.spec.replicas) ? object.spec.replicas : 0) < (has(oldObject.spec.replicas) ? oldObject.spec.replicas : 0)"}]}`
// +kubebuilder:webhook:path=/admission/hold-partition,mutating=true,failurePolicy=ignore,sideEffects=None,groups=apps,resources=statefulsets,verbs=update,versions=v1,name=hold-partition.echelon.dev,admissionReviewVersions=v1,matchPolicy=Equivalent,timeoutSeconds=10,reinvocationPolicy=IfNeeded,serviceName=echelon-webhook,serviceNamespace=echelon-system,patch=`{"namespaceSelector":{"matchExpressions":[{"key":"kubernetes.io/metadata.name","operator":"NotIn","values":["kube-system","echelon-system"]}]},"objectSelector":{"matchExpressions":[{"key":"echelon.dev/partition-holder","operator":"Exists"}]},"matchConditions":[{"name":"changes-template","expression":"object.spec.template != oldObject.spec.template"}]}`
// +kubebuilder:webhook:path=/admission/validate,mutating=false,failurePolicy=ignore,sideEffects=NoneOnDryRun,groups=echelon.dev,resources=rolloutgroups;scalingpolicies;delayeddownscales;zonedisruptionbudgets,verbs=create;update,versions=v1alpha1,name=validate.echelon.dev,admissionReviewVersions=v1,matchPolicy=Equivalent,timeoutSeconds=10,serviceName=echelon-webhook,serviceNamespace=echelon-system,patch=`{"namespaceSelector":{"matchExpressions":[{"key":"kubernetes.io/metadata.name","operator":"NotIn","values":["kube-system","echelon-system"]}]}}`
// +kubebuilder:webhook:path=/admission/eviction,mutating=false,failurePolicy=fail,sideEffects=NoneOnDryRun,groups="",resources=pods/eviction,verbs=create,versions=v1,name=eviction.echelon.dev,admissionReviewVersions=v1,matchPolicy=Equivalent,timeoutSeconds=10,serviceName=echelon-webhook,serviceNamespace=echelon-system,patch=`{"namespaceSelector":{"matchExpressions":[{"key":"kubernetes.io/metadata.name","operator":"NotIn","values":["kube-system","echelon-system"]}]}}`
// +kubebuilder:webhook:path=/admission/downscale-budget,mutating=false,failurePolicy=fail,sideEffects=NoneOnDryRun,groups=apps,resources=statefulsets,verbs=update,versions=v1,name=downscale-budget.echelon.dev,admissionReviewVersions=v1,matchPolicy=Equivalent,timeoutSeconds=10,serviceName=echelon-webhook,serviceNamespace=echelon-system,patch=`{"namespaceSelector":{"matchExpressions":[{"key":"kubernetes.io/metadata.name","operator":"NotIn","values":["kube-system","echelon-system"]}]},"objectSelector":{"matchExpressions":[{"key":"echelon.dev/budget-member","operator":"Exists"}]},"matchConditions":[{"name":"lowers-replicas","expression":"has(object.spec.replicas) && has(oldObject.spec.replicas) && object.spec.replicas < oldObject.spec.replicas"}]}`
// +kubebuilder:webhook:path=/admission/downscale-budget,mutating=false,failurePolicy=fail,sideEffects=NoneOnDryRun,groups=apps,resources=statefulsets/scale,verbs=update,versions=v1,name=scale.downscale-budget.echelon.dev,admissionReviewVersions=v1,matchPolicy=Equivalent,timeoutSeconds=10,serviceName=echelon-webhook,serviceNamespace=echelon-system,patch=`{"namespaceSelector":{"matchExpressions":[{"key":"kubernetes.io/metadata.name","operator":"NotIn","values":["kube-system","echelon-system"]}]},"matchConditions":[{"name":"lowers-replicas","expression":"(has(object.spec.replicas) ? object.spec.replicas : 0) < (has(oldObject.spec.replicas) ? oldObject.spec.replicas : 0)"}]}`
