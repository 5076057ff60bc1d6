package v1alpha1

// MemberLabel marks a StatefulSet as a member of a RolloutGroup, whose
// disruption budget judges its downscales; its value is the group's UID (a
// name may be longer than a label value). The RolloutGroup controller sets it
// on every member and removes it when the StatefulSet leaves the group or the
// group is deleted. It only narrows what the API server sends to the
// downscale-budget webhook (its objectSelector): which group judges a
// downscale is read from the groups themselves, so a label that is stale or
// missing never changes a verdict, only whether one is asked for.
const MemberLabel = "echelon.dev/budget-member"
