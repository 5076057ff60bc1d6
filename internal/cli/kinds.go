package cli

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// kind is one of the resources the plugin shows.
type kind string

const (
	kindRolloutGroup     kind = "RolloutGroup"
	kindScalingPolicy    kind = "ScalingPolicy"
	kindDelayedDownscale kind = "DelayedDownscale"
)

// kindNames are the names kubectl accepts for each kind: short name,
// singular and plural, each also with the API group.
var kindNames = map[string]kind{
	"rg": kindRolloutGroup, "rolloutgroup": kindRolloutGroup, "rolloutgroups": kindRolloutGroup,
	"sp": kindScalingPolicy, "scalingpolicy": kindScalingPolicy, "scalingpolicies": kindScalingPolicy,
	"dd": kindDelayedDownscale, "delayeddownscale": kindDelayedDownscale, "delayeddownscales": kindDelayedDownscale,
}

// parseTarget reads "KIND NAME" or "KIND/NAME", as kubectl does.
func parseTarget(args []string) (kind, string, error) {
	word, name := args[0], ""
	if before, after, ok := strings.Cut(word, "/"); ok {
		if len(args) > 1 {
			return "", "", fmt.Errorf("give either %s or %s %s, not both", word, before, args[1])
		}
		word, name = before, after
	} else if len(args) > 1 {
		name = args[1]
	}
	k, ok := kindNames[strings.TrimSuffix(strings.ToLower(word), ".echelon.dev")]
	if !ok {
		return "", "", fmt.Errorf("unknown kind %q: want rg (rolloutgroup), sp (scalingpolicy) or dd (delayeddownscale)", word)
	}
	if name == "" {
		return "", "", fmt.Errorf("no name given: kubectl echelon get %s NAME", word)
	}
	return k, name, nil
}

// target reads "KIND NAME" and opens the session that names the namespace.
func (o *options) target(args []string) (kind, types.NamespacedName, *session, error) {
	k, name, err := parseTarget(args)
	if err != nil {
		return "", types.NamespacedName{}, nil, err
	}
	s, err := o.session()
	if err != nil {
		return "", types.NamespacedName{}, nil, err
	}
	return k, types.NamespacedName{Namespace: s.namespace, Name: name}, s, nil
}
