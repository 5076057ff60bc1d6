package webhooks

import (
	"fmt"
	"regexp"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// ValidateZoneDisruptionBudget checks the rules of zdb that CEL cannot: its
// partition regex and its spec.zoneFrom.nameRegex are ones Go's regexp
// compiles, the first with the group it names. (Its other rules are CEL
// rules; it needs no other object.)
func ValidateZoneDisruptionBudget(zdb *v1alpha1.ZoneDisruptionBudget, _ NamespaceObjects) field.ErrorList {
	errs := validateZoneBudget(&zdb.Spec.ZoneBudget, field.NewPath("spec"))
	if from := zdb.Spec.ZoneFrom; from != nil && from.NameRegex != "" {
		if _, err := regexp.Compile(from.NameRegex); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("spec", "zoneFrom", "nameRegex"), from.NameRegex, err.Error()))
		}
	}
	return errs
}

// validateZoneBudget checks a zone budget's partition regex: a budget whose
// regex does not compile judges no eviction, so it is refused where it is
// written rather than found out at the first drain.
func validateZoneBudget(b *v1alpha1.ZoneBudget, path *field.Path) field.ErrorList {
	if b == nil || b.PodNamePartitionRegex == "" {
		return nil
	}
	re, err := regexp.Compile(b.PodNamePartitionRegex)
	if err != nil {
		return field.ErrorList{field.Invalid(path.Child("podNamePartitionRegex"), b.PodNamePartitionRegex, err.Error())}
	}
	group := int32(1)
	if b.PodNamePartitionGroup != nil {
		group = *b.PodNamePartitionGroup
	}
	if int(group) > re.NumSubexp() {
		return field.ErrorList{field.Invalid(path.Child("podNamePartitionGroup"), group,
			fmt.Sprintf("podNamePartitionRegex %q has %d groups: name the one that captures the partition (the default is 1)", b.PodNamePartitionRegex, re.NumSubexp()))}
	}
	return nil
}
