package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/lookup"
)

// Identity is the operator's own user, as the API server authenticates it.
//
// A request is the ScalingPolicy controller's own write when it comes from
// this user AND names the controller's field manager. Either alone is not
// enough:
//   - the field manager is chosen by the client: anyone may send
//     fieldManager=echelon-scalingpolicy, but nobody can be the operator's
//     ServiceAccount without its token or the right to impersonate it;
//   - the user name alone would also pass the operator's other writes, and
//     any future one: only the ScalingPolicy controller follows the
//     policy's source and has checked the zone delay and the other zones'
//     readiness with a live read just before it patches.
type Identity struct {
	// Username is request.userInfo.username of the operator's requests,
	// e.g. system:serviceaccount:echelon-system:echelon.
	Username string
}

// LearnIdentity asks the API server who the operator is, with one
// SelfSubjectReview (authentication.k8s.io/v1, which every authenticated
// user may create through the system:basic-user role).
func LearnIdentity(ctx context.Context, c client.Client) (Identity, error) {
	review := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(ctx, review); err != nil {
		return Identity{}, fmt.Errorf("learn the operator's user name with a SelfSubjectReview: %w", err)
	}
	name := review.Status.UserInfo.Username
	if name == "" {
		return Identity{}, errors.New("learn the operator's user name: the SelfSubjectReview answered no user name")
	}
	return Identity{Username: name}, nil
}

// ownScalingPolicyWrite says whether req is the ScalingPolicy controller's
// own write of a target's replicas.
func (id Identity) ownScalingPolicyWrite(req *admissionv1.AdmissionRequest) bool {
	if id.Username == "" || req.UserInfo.Username != id.Username {
		return false
	}
	return fieldManager(req) == lookup.ScalingPolicyFieldManager
}

// ownScalingPolicyWriteOf says whether req is the ScalingPolicy controller's
// own write of the target whose policies these are. The controller writes a
// target only when its one policy scales it (has a source): a policy that only
// guards, or two policies of one target (then neither scales it), leave it no
// write of the target, so none passes as its own.
func (id Identity) ownScalingPolicyWriteOf(req *admissionv1.AdmissionRequest, policies []v1alpha1.ScalingPolicy) bool {
	return len(policies) == 1 && policies[0].Spec.HasSource() && id.ownScalingPolicyWrite(req)
}

// fieldManager is request.options.fieldManager: the UpdateOptions of an
// UPDATE, which the API server also builds from a PATCH's PatchOptions.
func fieldManager(req *admissionv1.AdmissionRequest) string {
	if len(req.Options.Raw) == 0 {
		return ""
	}
	var opts struct {
		FieldManager string `json:"fieldManager"`
	}
	if err := json.Unmarshal(req.Options.Raw, &opts); err != nil {
		return ""
	}
	return opts.FieldManager
}
