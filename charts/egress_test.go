package charts

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// TestEgressAllow: egress.allow becomes --egress-allow, empty by default
// (the guard's default: loopback, link-local, metadata and the operator's
// own addresses refused).
func TestEgressAllow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{name: "default", want: nil},
		{name: "CIDRs and host names", args: []string{"--set", "egress.allow={10.0.0.0/8,::1,metadata-proxy.infra.svc}"}, want: []string{"10.0.0.0/8", "::1", "metadata-proxy.infra.svc"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := one[appsv1.Deployment](render(t, tc.args...), "Deployment").Spec.Template.Spec.Containers[0].Args
			if opts := parseArgs(t, args); !slices.Equal(opts.EgressAllow, tc.want) {
				t.Errorf("args %v: --egress-allow is %q, want %q", args, opts.EgressAllow, tc.want)
			}
		})
	}
}

// TestEgressNetworkPolicy: off by default; on, it selects the operator's
// pods, refuses the link-local range of each family and lets DNS through
// anywhere.
func TestEgressNetworkPolicy(t *testing.T) {
	t.Parallel()
	if n := render(t).count("NetworkPolicy"); n != 0 {
		t.Errorf("%d NetworkPolicies by default, want none", n)
	}
	m := render(t, "--set", "egress.networkPolicy.enabled=true")
	np := one[networkingv1.NetworkPolicy](m, "NetworkPolicy")
	deploy := one[appsv1.Deployment](m, "Deployment")
	if !selects(np.Spec.PodSelector.MatchLabels, deploy.Spec.Template.Labels) || !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}) {
		t.Errorf("NetworkPolicy selects %v with types %v, want the operator's pods %v and Egress", np.Spec.PodSelector.MatchLabels, np.Spec.PolicyTypes, deploy.Spec.Template.Labels)
	}
	var dns bool
	excepted := map[string][]string{}
	for _, rule := range np.Spec.Egress {
		if len(rule.To) == 0 && len(rule.Ports) == 2 && rule.Ports[0].Port.IntValue() == 53 {
			dns = true
		}
		for _, peer := range rule.To {
			if peer.IPBlock != nil {
				excepted[peer.IPBlock.CIDR] = peer.IPBlock.Except
			}
		}
	}
	if !dns {
		t.Errorf("egress rules %+v let no DNS through", np.Spec.Egress)
	}
	if !slices.Equal(excepted["0.0.0.0/0"], []string{"169.254.0.0/16"}) || !slices.Equal(excepted["::/0"], []string{"fe80::/10"}) {
		t.Errorf("ipBlocks %v, want 0.0.0.0/0 except 169.254.0.0/16 and ::/0 except fe80::/10", excepted)
	}
	_, stderr, err := runHelm(t, "template", releaseName, chartDir, "--set", "egress.networkPolicy.except={169.254.0.0}")
	if err == nil || !strings.Contains(stderr, "/egress/networkPolicy/except/0") {
		t.Errorf("except without a prefix length: err %v, want a schema error: %s", err, stderr)
	}
}
