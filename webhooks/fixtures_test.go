package webhooks

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/lookup"
	"github.com/echelon-operator/echelon/internal/podname"
	"github.com/echelon-operator/echelon/internal/scaling"
	"github.com/echelon-operator/echelon/test/builders"
	"github.com/echelon-operator/echelon/webhooks/webhookstest"
)

const (
	testNS       = "mimir"
	operatorUser = "system:serviceaccount:echelon-system:echelon"
)

// fakeCluster answers the webhooks' lookups from fixed objects.
type fakeCluster struct {
	mu        sync.Mutex
	unwatched []string
	policies  []v1alpha1.ScalingPolicy
	sets      []appsv1.StatefulSet
	pods      []corev1.Pod
	group     *scaling.Group
	objs      NamespaceObjects
	// lookupErr fails every read; recordErr fails RecordDownscale.
	lookupErr, recordErr error
	// recordHangs makes RecordDownscale wait until its context ends, as a
	// slow API server would; recordDeadline is that context's deadline.
	recordHangs    bool
	recordDeadline time.Time
	recorded       map[string]time.Time
	// pending is the status.pendingDownscale each policy was given.
	pending map[string]v1alpha1.PendingDownscale
}

func (c *fakeCluster) Watches(ns string) bool { return !slices.Contains(c.unwatched, ns) }

func (c *fakeCluster) PoliciesForTarget(_ context.Context, ns, kind, name string) ([]v1alpha1.ScalingPolicy, error) {
	if c.lookupErr != nil {
		return nil, c.lookupErr
	}
	var out []v1alpha1.ScalingPolicy
	for _, p := range c.policies {
		if p.Namespace == ns && lookup.PolicyTargetKey(p.Spec.TargetRef.Kind, p.Spec.TargetRef.Name) == lookup.PolicyTargetKey(kind, name) {
			out = append(out, *p.DeepCopy())
		}
	}
	return out, nil
}

func (c *fakeCluster) StatefulSet(_ context.Context, ns, name string) (*appsv1.StatefulSet, error) {
	if c.lookupErr != nil {
		return nil, c.lookupErr
	}
	for _, s := range c.sets {
		if s.Namespace == ns && s.Name == name {
			return s.DeepCopy(), nil
		}
	}
	return nil, nil
}

func (c *fakeCluster) Pod(_ context.Context, ns, name string) (*corev1.Pod, error) {
	if c.lookupErr != nil {
		return nil, c.lookupErr
	}
	for _, p := range c.pods {
		if p.Namespace == ns && p.Name == name {
			return p.DeepCopy(), nil
		}
	}
	return nil, nil
}

func (c *fakeCluster) DownscaleGroup(context.Context, *appsv1.StatefulSet) (*scaling.Group, error) {
	return c.group, c.lookupErr
}

func (c *fakeCluster) Objects(context.Context, string) (NamespaceObjects, error) {
	return c.objs, c.lookupErr
}

func (c *fakeCluster) RecordDownscale(ctx context.Context, p *v1alpha1.ScalingPolicy, pending v1alpha1.PendingDownscale) error {
	at := pending.AdmittedAt.Time
	if c.recordHangs {
		c.mu.Lock()
		c.recordDeadline, _ = ctx.Deadline()
		c.mu.Unlock()
		<-ctx.Done()
		return ctx.Err()
	}
	if c.recordErr != nil {
		return c.recordErr
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.recorded == nil {
		c.recorded = map[string]time.Time{}
		c.pending = map[string]v1alpha1.PendingDownscale{}
	}
	c.recorded[p.Name] = at
	c.pending[p.Name] = pending
	return nil
}

// recordedEvent is one Event a webhook recorded.
type recordedEvent struct {
	kind, name   string
	uid          types.UID
	reason, note string
	// related is "<kind>/<name>" of the Event's related object, "" when none.
	related string
}

type eventRecorder struct {
	mu     sync.Mutex
	events []recordedEvent
}

func (r *eventRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, _, note string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := regarding.(metav1.Object)
	if eventtype != corev1.EventTypeWarning {
		panic("a webhook records only Warning Events")
	}
	ev := recordedEvent{kind: kindOf(regarding), name: m.GetName(), uid: m.GetUID(), reason: reason, note: fmt.Sprintf(note, args...)}
	if related != nil {
		ev.related = kindOf(related) + "/" + related.(metav1.Object).GetName()
	}
	r.events = append(r.events, ev)
}

func kindOf(obj runtime.Object) string {
	kind := strings.TrimPrefix(fmt.Sprintf("%T", obj), "*v1.")
	return strings.TrimPrefix(kind, "*v1alpha1.")
}

func (r *eventRecorder) list() []recordedEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// Admission requests.

type reqBuilder struct{ r admissionv1.AdmissionRequest }

func raw(obj any) runtime.RawExtension {
	b, err := json.Marshal(obj)
	if err != nil {
		panic(err)
	}
	return runtime.RawExtension{Raw: b}
}

// updateOf is an UPDATE of a workload (apps/v1 resource) from old to new.
func updateOf(resource string, old, new runtime.Object) *reqBuilder {
	m := new.(metav1.Object)
	gvk := new.GetObjectKind().GroupVersionKind()
	return &reqBuilder{admissionv1.AdmissionRequest{
		UID:       "req-1",
		Kind:      metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
		Resource:  metav1.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: resource},
		Name:      m.GetName(),
		Namespace: testNS,
		Operation: admissionv1.Update,
		UserInfo:  authenticationv1.UserInfo{Username: "alice"},
		Object:    raw(new),
		OldObject: raw(old),
	}}
}

// stsUpdate is an UPDATE of StatefulSet name from old to new replicas.
func stsUpdate(name string, old, new int32) *reqBuilder {
	sts := builders.MakeStatefulSet(testNS, name).TypeMeta()
	return updateOf("statefulsets", sts.Replicas(old).Obj(), sts.Replicas(new).Obj())
}

// scaleUpdate is an UPDATE of the scale subresource of resource/name.
func scaleUpdate(resource, name string, old, new int32) *reqBuilder {
	scale := func(n int32) *autoscalingv1.Scale {
		return &autoscalingv1.Scale{
			TypeMeta:   metav1.TypeMeta{APIVersion: "autoscaling/v1", Kind: "Scale"},
			ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name, UID: types.UID("uid-" + name)},
			Spec:       autoscalingv1.ScaleSpec{Replicas: n},
		}
	}
	b := updateOf(resource, scale(old), scale(new))
	b.r.Resource = metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: resource}
	b.r.SubResource = scaleSubresource
	return b
}

func (b *reqBuilder) user(name, fieldManager string) *reqBuilder {
	b.r.UserInfo.Username = name
	b.r.Options = raw(metav1.UpdateOptions{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "UpdateOptions"}, FieldManager: fieldManager})
	return b
}

func (b *reqBuilder) operatorOwn() *reqBuilder {
	return b.user(operatorUser, lookup.ScalingPolicyFieldManager)
}

func (b *reqBuilder) dryRun() *reqBuilder { b.r.DryRun = ptr.To(true); return b }

func (b *reqBuilder) op(o admissionv1.Operation) *reqBuilder { b.r.Operation = o; return b }

func (b *reqBuilder) review() []byte {
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  &b.r,
	})
	if err != nil {
		panic(err)
	}
	return body
}

// answer is what the HTTP handler said.
type answer struct {
	httpStatus int
	response   *admissionv1.AdmissionResponse
	body       string
}

func (a answer) message() string {
	if a.response == nil || a.response.Result == nil {
		return ""
	}
	return a.response.Result.Message
}

// serve sends body through h, as the API server would, with query (e.g.
// "timeout=10s") on the URL.
func serve(t testing.TB, h http.Handler, body []byte, query string) answer {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/admission/x?"+query, bytes.NewReader(body))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	a := answer{httpStatus: w.Code, body: w.Body.String()}
	if w.Code == http.StatusOK {
		var review admissionv1.AdmissionReview
		if err := json.Unmarshal(w.Body.Bytes(), &review); err != nil {
			t.Fatalf("answer is not an AdmissionReview: %v: %s", err, w.Body.String())
		}
		if review.APIVersion != "admission.k8s.io/v1" || review.Kind != "AdmissionReview" || review.Response == nil {
			t.Fatalf("answer is not an AdmissionReview v1 with a response: %s", w.Body.String())
		}
		a.response = review.Response
	}
	return a
}

func handler(webhook string, d decider, events eventSink) http.Handler {
	return &reviewHandler{webhook: webhook, failurePolicy: DefaultFailurePolicy(webhook), decider: d, events: events, log: logr.Discard()}
}

// newPodServer serves the pods of StatefulSet set with the given ordinals.
func newPodServer(t testing.TB, set string, ordinals ...int) *webhookstest.PodServer {
	return webhookstest.NewPodServer(t, 0, set, ordinals...)
}

// runningPods are the cached pods of StatefulSet set that pods serves:
// Running, with their IPs.
func runningPods(set string, pods *webhookstest.PodServer) []corev1.Pod {
	var out []corev1.Pod
	for name, ip := range pods.IPs() {
		ord, ok := podname.Ordinal(set, name)
		if !ok {
			panic(fmt.Sprintf("pod %s is not of StatefulSet %s", name, set))
		}
		out = append(out, *builders.MakePod(testNS, set, ord).IP(ip).Obj())
	}
	return out
}

func orEmpty(c *fakeCluster) *fakeCluster {
	if c == nil {
		return &fakeCluster{}
	}
	return c
}
