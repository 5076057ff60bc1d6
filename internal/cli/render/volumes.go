package render

import (
	"fmt"
	"strings"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// volumeLine sums up the group's volume resize (status.volumeResize): its
// phase and message, then each zone's phase and claims resized; "" when
// the group asks for none.
func volumeLine(rg *v1alpha1.RolloutGroup) string {
	st := rg.Status.VolumeResize
	if st == nil {
		if len(rg.Spec.VolumeClaimSizes) > 0 {
			return "asked for " + sizesText(rg.Spec.VolumeClaimSizes) + "; not started yet"
		}
		return ""
	}
	var zones []string
	for _, z := range st.Zones {
		resized := 0
		for _, c := range z.Claims {
			if c.Phase == v1alpha1.ClaimResized {
				resized++
			}
		}
		zones = append(zones, fmt.Sprintf("%s %s (%d/%d claims resized)", z.Name, z.Phase, resized, len(z.Claims)))
	}
	line := fmt.Sprintf("%s to %s: %s", st.Phase, sizesText(rg.Spec.VolumeClaimSizes), st.Message)
	if len(zones) > 0 {
		line += "; " + strings.Join(zones, ", ")
	}
	return line
}

// volumePlanLine says what the volume resizer does next, as its last pass
// recorded it; "" when the group asks for no resize.
func volumePlanLine(rg *v1alpha1.RolloutGroup) string {
	st := rg.Status.VolumeResize
	switch {
	case st == nil && len(rg.Spec.VolumeClaimSizes) == 0:
		return ""
	case st == nil:
		return fmt.Sprintf("Volume resize: %s asked for; the first zone is held through the disruption budget, then its claims are patched", sizesText(rg.Spec.VolumeClaimSizes))
	case st.Phase == v1alpha1.VolumeResizeComplete:
		return "Volume resize: complete; nothing to do"
	case st.Recreate != nil:
		return fmt.Sprintf("Volume resize: %s (StatefulSet %s recorded for its re-creation: it is created again from status.volumeResize.recreate)", st.Message, st.Recreate.Name)
	}
	return "Volume resize: " + st.Message
}

func sizesText(sizes []v1alpha1.VolumeClaimSize) string {
	var parts []string
	for _, s := range sizes {
		parts = append(parts, s.Name+" "+s.Size)
	}
	if len(parts) == 0 {
		return "no size"
	}
	return strings.Join(parts, ", ")
}
