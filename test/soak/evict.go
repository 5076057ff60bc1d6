package soak

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/test/controlplane"
)

const (
	// evictFor bounds an Evict step: how long it retries while the budget
	// refuses (a crash loop can hold a zone disrupted for minutes).
	evictFor = 45 * time.Second
	// drainFor bounds a Drain step; the node is uncordoned after it either
	// way.
	drainFor = 3 * time.Minute
	// evictRetry is how long an eviction waits after a refusal, as a drainer
	// does (kubectl drain waits 5s).
	evictRetry = 2 * time.Second
)

// evictions carries out the Evict and Drain steps through the Eviction API,
// which the eviction webhook judges with each group's budget, and keeps
// their count. It remembers the pods it evicted, so that they are not
// counted as the rollouts' rolls.
type evictions struct {
	c          client.Client
	cs         kubernetes.Interface
	namespaces sets.Set[string]

	// drainMu lets one drain run at a time, as one node pool upgrade does.
	drainMu sync.Mutex

	mu      sync.Mutex
	evicted sets.Set[types.UID]
	counts  EvictionCounts
}

// EvictionCounts is what the evictions and drains of a soak did.
type EvictionCounts struct {
	// Admitted and Refused count the eviction requests the API server
	// admitted and refused (429, the budget's answer); Errors those that got
	// another error (an API server restarting).
	Admitted, Refused, Errors int
	// ErrorKinds counts Errors by kind: the API status code and reason, or
	// the client's error for a request that got no answer.
	ErrorKinds map[string]int
	// EvictsGivenUp counts the Evict steps still refused after evictFor.
	EvictsGivenUp int
	// Drains counts the drains; DrainsUnfinished those that left pods on
	// their node after drainFor; LongestDrain is the longest drain.
	Drains, DrainsUnfinished int
	LongestDrain             time.Duration
}

func newEvictions(c client.Client, cs kubernetes.Interface, namespaces []string) *evictions {
	return &evictions{c: c, cs: cs, namespaces: sets.New(namespaces...), evicted: sets.New[types.UID]()}
}

// isEvicted reports whether the soak evicted the pod with uid.
func (e *evictions) isEvicted(uid types.UID) bool {
	if e == nil {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.evicted.Has(uid)
}

func (e *evictions) totals() EvictionCounts {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.counts
	c.ErrorKinds = maps.Clone(c.ErrorKinds)
	return c
}

// errorKind names an eviction error without its pod: "500 InternalError:
// <message>" cut short, or the client's error for no answer.
func errorKind(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		st := status.Status()
		msg := st.Message
		if i := strings.Index(msg, ": "); i >= 0 && len(msg) > 80 {
			msg = msg[i+2:]
		}
		if len(msg) > 80 {
			msg = msg[:80]
		}
		return fmt.Sprintf("%d %s: %s", st.Code, st.Reason, msg)
	}
	msg := err.Error()
	if len(msg) > 80 {
		msg = msg[:80]
	}
	return msg
}

// evict asks once to evict pod, bound to its UID so that a pod recreated
// under the same name is not evicted by a retry meant for its predecessor.
// It returns true when the pod is gone or going: admitted, or already
// deleted.
func (e *evictions) evict(ctx context.Context, pod *corev1.Pod) bool {
	ev := &policyv1.Eviction{
		ObjectMeta:    metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name},
		DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}},
	}
	err := e.cs.PolicyV1().Evictions(pod.Namespace).Evict(ctx, ev)
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case err == nil:
		e.counts.Admitted++
		e.evicted.Insert(pod.UID)
		return true
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return true // gone already, or replaced by a new pod
	case apierrors.IsTooManyRequests(err):
		e.counts.Refused++
	default:
		e.counts.Errors++
		if e.counts.ErrorKinds == nil {
			e.counts.ErrorKinds = map[string]int{}
		}
		e.counts.ErrorKinds[errorKind(err)]++
	}
	return false
}

// evictFromGroup carries out an Evict step on g: the zone's pod with the
// step's ordinal, or the zone's first live pod when there is none, retried
// while refused, for evictFor at most.
func (e *evictions) evictFromGroup(ctx context.Context, g *group, st Step) {
	zone := g.zones[st.Zone%len(g.zones)]
	deadline := time.Now().Add(evictFor)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		var pods corev1.PodList
		if err := g.c.List(ctx, &pods, client.InNamespace(g.ns), client.MatchingLabels{"app": zone}); err == nil {
			if pod := pickPod(pods.Items, fmt.Sprintf("%s-%d", zone, st.Pod)); pod != nil && e.evict(ctx, pod) {
				return
			}
		}
		sleep(ctx, evictRetry)
	}
	e.mu.Lock()
	e.counts.EvictsGivenUp++
	e.mu.Unlock()
}

// pickPod is the live pod named name, or the first live pod by name.
func pickPod(pods []corev1.Pod, name string) *corev1.Pod {
	live := slices.DeleteFunc(slices.Clone(pods), func(p corev1.Pod) bool { return p.DeletionTimestamp != nil })
	if len(live) == 0 {
		return nil
	}
	slices.SortFunc(live, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	for i := range live {
		if live[i].Name == name {
			return &live[i]
		}
	}
	return &live[0]
}

// drain cordons the node with index i (the fake nodes by name), evicts every
// soak pod on it, each retried while refused, until none is left or
// drainFor has passed, and uncordons it.
func (e *evictions) drain(ctx context.Context, i int) error {
	e.drainMu.Lock()
	defer e.drainMu.Unlock()
	// The API server may be restarting (a chaos step of its own): the list
	// is retried for as long as a drain may take.
	var nodes corev1.NodeList
	for start := time.Now(); ; {
		err := e.c.List(ctx, &nodes)
		if err == nil {
			break
		}
		if time.Since(start) >= drainFor || ctx.Err() != nil {
			return err
		}
		sleep(ctx, evictRetry)
	}
	var names []string
	for _, n := range nodes.Items {
		if _, fake := n.Annotations[controlplane.FakeNodeAnnotation]; fake {
			names = append(names, n.Name)
		}
	}
	if len(names) == 0 {
		return fmt.Errorf("no node to drain")
	}
	slices.Sort(names)
	node := names[i%len(names)]
	if err := e.cordon(ctx, node, true); err != nil {
		return err
	}
	start := time.Now()
	unfinished := true
	for time.Since(start) < drainFor && ctx.Err() == nil {
		pods, err := e.cs.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			sleep(ctx, evictRetry)
			continue
		}
		left := 0
		var wg sync.WaitGroup
		for _, p := range pods.Items {
			if !e.namespaces.Has(p.Namespace) || p.DeletionTimestamp != nil {
				continue
			}
			left++
			// Every pod at once, as kubectl drain asks: the budget, not the
			// drainer, orders them.
			wg.Go(func() { e.evict(ctx, &p) })
		}
		wg.Wait()
		if left == 0 {
			unfinished = false
			break
		}
		sleep(ctx, evictRetry)
	}
	took := time.Since(start)
	e.mu.Lock()
	e.counts.Drains++
	if unfinished {
		e.counts.DrainsUnfinished++
	}
	e.counts.LongestDrain = max(e.counts.LongestDrain, took)
	e.mu.Unlock()
	// Uncordoned even when the soak is stopping: a background context.
	return e.cordon(context.WithoutCancel(ctx), node, false)
}

func (e *evictions) cordon(ctx context.Context, node string, on bool) error {
	patch := fmt.Appendf(nil, `{"spec":{"unschedulable":%t}}`, on)
	_, err := e.cs.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("cordon %s (%t): %w", node, on, err)
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
