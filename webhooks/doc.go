// Package webhooks holds Echelon's admission webhooks, served over HTTPS by
// every replica of the operator (Setup):
//
//   - /admission/no-downscale (validating; apps/v1 StatefulSets, Deployments,
//     ReplicaSets and their /scale; UPDATE) refuses a decrease of replicas of
//     a workload whose ScalingPolicy sets spec.downscale.allowed: false,
//     unless the ScalingPolicy controller itself makes it (Identity).
//   - /admission/prepare-downscale (mutating, never patches; StatefulSets and
//     their /scale; UPDATE; sideEffects NoneOnDryRun) admits a downscale of a
//     StatefulSet whose policy sets spec.downscale.prepare only once every
//     pod it removes has answered the prepare call, and only when the zone
//     delay and the other members' readiness let the controller do the same.
//     Any failure tells the pods that may have prepared to cancel, and denies.
//     It also refuses a downscale the policy forbids (downscale.allowed:
//     false), which no-downscale would refuse after it: no pod is prepared
//     for a downscale that cannot happen.
//   - /admission/validate (validating; RolloutGroups, ScalingPolicies,
//     DelayedDownscales and ZoneDisruptionBudgets; CREATE and UPDATE)
//     applies the rules that need other objects, or a parser CEL lacks
//     (ValidateRolloutGroup, ValidateScalingPolicy, ValidateDelayedDownscale,
//     ValidateZoneDisruptionBudget). Rules on one object are CEL rules on the
//     CRDs.
//   - /admission/eviction (validating; the pods/eviction subresource;
//     CREATE; sideEffects NoneOnDryRun) admits the eviction of a pod of a
//     RolloutGroup or a ZoneDisruptionBudget only when disruption.Decide
//     allows it on what the API server holds, after recording the budget's
//     hold (budget.Acquire); it refuses with code 429, as the API server does
//     for a PodDisruptionBudget, so that `kubectl drain` asks again. A dry
//     run, in the request or in the Eviction's deleteOptions, decides
//     without recording. A pod no budget covers is allowed.
//
// What each answers to input it does not expect:
//   - a body that is not an AdmissionReview v1 with a request and a uid:
//     HTTP 400 (405 for a method other than POST, 413 past 7 MiB); the API
//     server then applies the webhook's failurePolicy;
//   - a resource, subresource or operation the webhook does not judge:
//     allowed, with a warning saying so;
//   - a request it judges but that lacks what it needs (no object, an object
//     of another kind): refused with code 400;
//   - a failed lookup, or a panic (a bug, recovered): refused with code 500
//     by the downscale and eviction webhooks (failurePolicy Fail), but for
//     an eviction whose budget's hold other decisions kept taking meanwhile,
//     refused with 429 to be asked again; by the validation webhook as its
//     configured failurePolicy says (--validate-webhook-failure-policy):
//     under Ignore (the default) allowed with a warning naming the problem,
//     since a code 500 in an answer is a refusal whatever the policy, under
//     Fail refused with code 500;
//   - a namespace the operator does not watch: allowed, with a warning.
//
// Every answer is counted in echelon_webhook_requests_total, and every
// refusal of a request that is not a dry run is a Warning Event on the
// object it is about (an UPDATE's; a CREATE has no object yet; a refused
// eviction's budget, with the pod as related object, once a minute per pod).
package webhooks
