package soak

import (
	"context"
	"fmt"
	"net"
	"net/http"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// throttledLevel is the API Priority and Fairness level the operator's
// requests go to when the soak throttles them.
const throttledLevel = "echelon-soak-throttled"

// throttledShares is the level's share of the API server's concurrency: 2
// of the about 250 that the default levels hold, so about 5 of its 600
// seats. With 1 share (3 seats) a fresh operator over 8 namespaces took two
// minutes to fill its caches, its LISTs mostly answered 429.
const throttledShares = 2

// throttle puts every request of user, but its Lease's, in a priority level
// with the smallest share of the API server's concurrency and no queue, so
// that requests beyond its few seats are answered 429 at once, as on a
// cluster whose priority and fairness is set low for the operator. The
// Lease requests keep the leader-election level: a leader that cannot renew
// its Lease exits, which is a different fault (the handovers test it).
func throttle(ctx context.Context, c client.Client, user string) error {
	level := &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: throttledLevel},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{
			Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{
				NominalConcurrencyShares: ptr.To[int32](throttledShares),
				LendablePercent:          ptr.To[int32](0),
				LimitResponse:            flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject},
			},
		},
	}
	subject := []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: user}}}
	leases := &flowcontrolv1.FlowSchema{
		ObjectMeta: metav1.ObjectMeta{Name: "echelon-soak-leases"},
		Spec: flowcontrolv1.FlowSchemaSpec{
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "leader-election"},
			MatchingPrecedence:         400,
			DistinguisherMethod:        &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{Subjects: subject, ResourceRules: []flowcontrolv1.ResourcePolicyRule{{
				Verbs: []string{"*"}, APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Namespaces: []string{"*"},
			}}}},
		},
	}
	rest := &flowcontrolv1.FlowSchema{
		ObjectMeta: metav1.ObjectMeta{Name: "echelon-soak-throttled"},
		Spec: flowcontrolv1.FlowSchemaSpec{
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: throttledLevel},
			MatchingPrecedence:         500,
			DistinguisherMethod:        &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{Subjects: subject,
				ResourceRules: []flowcontrolv1.ResourcePolicyRule{{
					Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}, Namespaces: []string{"*"}, ClusterScope: true,
				}},
				NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}},
			}},
		},
	}
	for _, obj := range []client.Object{level, leases, rest} {
		if err := c.Create(ctx, obj); err != nil {
			return fmt.Errorf("throttle the operator: create %s: %w", obj.GetName(), err)
		}
	}
	return nil
}

// failingPrometheus answers every query of Prometheus's HTTP API with one
// sample of value 5: the analysis gate of a GateFail script (errors < 1)
// fails at its first query. It stands in for Prometheus, which the gates'
// own e2e specs run for real.
func failingPrometheus() (addr string, stop func(), err error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/query" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1717243200,"5"]}]}}`)
	})}
	go func() { _ = srv.Serve(l) }()
	return "http://" + l.Addr().String(), func() { _ = srv.Close() }, nil
}
