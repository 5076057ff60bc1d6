package delayeddownscale

import (
	"errors"
	"testing"

	"github.com/echelon-operator/echelon/internal/delayed"
	"github.com/echelon-operator/echelon/internal/httptls"
)

// Each pod is called with the endpoint's tls block; when the block could
// not be read, every addressable pod answers at once with that error (it
// names the field), and a pod without an address keeps its own reason.
func TestTargets(t *testing.T) {
	obs := observation{
		in: delayed.Input{Pods: map[string]delayed.Pod{
			"ing-0": {Name: "ing-0"},
			"ing-1": {Name: "ing-1", AddressError: "the pod has no IP yet"},
		}},
		urls: map[string]string{"ing-0": "https://10.0.0.1:8080/prepare"},
	}
	material := &httptls.Material{ServerName: "ing.mimir.svc"}
	targets, unreachable := obs.targets([]string{"ing-0", "ing-1", "gone"}, material, nil)
	if len(targets) != 1 || targets[0].Pod != "ing-0" || targets[0].TLS != material {
		t.Errorf("targets %+v, want ing-0 with the tls material", targets)
	}
	if len(unreachable) != 1 || unreachable["ing-1"].Err == nil || unreachable["ing-1"].Err.Error() != "the pod has no IP yet" {
		t.Errorf("unreachable %+v, want ing-1 with its address error", unreachable)
	}

	tlsErr := errors.New("spec.prepareEndpoint.tls.caSecretRef: Secret ca not found in namespace mimir")
	targets, unreachable = obs.targets([]string{"ing-0", "ing-1"}, nil, tlsErr)
	if len(targets) != 0 {
		t.Errorf("targets %+v while the tls block cannot be read, want none", targets)
	}
	if !errors.Is(unreachable["ing-0"].Err, tlsErr) || unreachable["ing-1"].Err.Error() != "the pod has no IP yet" {
		t.Errorf("unreachable %+v, want ing-0 with the tls error and ing-1 with its address error", unreachable)
	}
}
