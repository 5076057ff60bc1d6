package rolloutgroup

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

func rolledPods(names ...string) []*corev1.Pod {
	var out []*corev1.Pod
	for _, n := range names {
		out = append(out, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"controller-revision-hash": "old"}}})
	}
	return out
}

// TestBatchLog: a member's first batch is told at once; the batches within
// batchEventInterval after it are told together, when the interval has
// passed or when the pass rolls another member; a batch of another member
// tells the untold ones first. One Event per pod rolled was an API write per
// pod (issue 29: 66 Events for 90 pods).
func TestBatchLog(t *testing.T) {
	rg := &v1alpha1.RolloutGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ingester"}}
	l := newBatchLog()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	del := func(member string, pods ...string) rolledBatch {
		return rolledBatch{member: member, action: "Delete", verb: "deleted", revision: "new", pods: rolledPods(pods...)}
	}
	notes := func(ts []told) []string {
		var out []string
		for _, t := range ts {
			out = append(out, t.note)
		}
		return out
	}
	same := func(step string, got []string, want ...string) {
		t.Helper()
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s: told\n%s\nwant\n%s", step, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	same("first batch", notes(l.rolled(rg, del("zone-a", "zone-a-0", "zone-a-1"), at)),
		"deleted 2 pods of StatefulSet zone-a, rolling to revision new: zone-a-0 (old), zone-a-1 (old)")
	same("within the interval", notes(l.rolled(rg, del("zone-a", "zone-a-2"), at.Add(time.Second))))
	same("within the interval", notes(l.rolled(rg, del("zone-a", "zone-a-3"), at.Add(2*time.Second))))
	if got, wait := l.due(rg, "zone-a", at.Add(4*time.Second)); got != nil || wait != 6*time.Second {
		t.Errorf("due before the interval: %+v, wait %s; want nothing for 6s", got, wait)
	}
	got, wait := l.due(rg, "zone-a", at.Add(10*time.Second))
	if got == nil || wait != 0 || got.related.Name != "zone-a-2" {
		t.Fatalf("due after the interval: %+v, wait %s", got, wait)
	}
	same("told together", []string{got.note},
		"deleted 2 pods of StatefulSet zone-a in 2 batches, rolling to revision new: zone-a-2 (old), zone-a-3 (old)")
	same("within the new interval", notes(l.rolled(rg, del("zone-a", "zone-a-4"), at.Add(11*time.Second))))
	same("another member tells the untold first", notes(l.rolled(rg, del("zone-b", "zone-b-0"), at.Add(12*time.Second))),
		"deleted 1 pod of StatefulSet zone-a, rolling to revision new: zone-a-4 (old)",
		"deleted 1 pod of StatefulSet zone-b, rolling to revision new: zone-b-0 (old)")
	release := func(from, to int32, pod string) rolledBatch {
		return rolledBatch{member: "zone-c", action: "Release", verb: "released", partition: true, from: from, to: to, revision: "new", pods: rolledPods(pod)}
	}
	same("a release, first of its member", notes(l.rolled(rg, release(9, 8, "zone-c-8"), at.Add(20*time.Second))),
		"released 1 pod of StatefulSet zone-c by lowering its partition from 9 to 8, rolling to revision new: zone-c-8 (old)")
	same("released within the interval", notes(l.rolled(rg, release(8, 7, "zone-c-7"), at.Add(21*time.Second))))
	same("released within the interval", notes(l.rolled(rg, release(7, 6, "zone-c-6"), at.Add(22*time.Second))))
	got, _ = l.due(rg, "", at.Add(23*time.Second))
	if got == nil {
		t.Fatal("the rollout done: its untold releases are due at once")
	}
	same("releases told together", []string{got.note},
		"released 2 pods of StatefulSet zone-c by lowering its partition from 8 to 6 in 2 steps, rolling to revision new: zone-c-7 (old), zone-c-6 (old)")
}
