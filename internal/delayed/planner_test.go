package delayed

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"
)

var now = time.Date(2026, time.July, 1, 12, 0, 0, 0, time.UTC)

const delay = 4 * time.Hour

// sts is a StatefulSet "ing" at current replicas whose policy wants desired,
// every pod present and addressable.
func sts(desired, current int32) Input {
	in := Input{Now: now, Delay: delay, Desired: ptr.To(desired), Current: current, NamePrefix: "ing", Pods: map[string]Pod{}}
	for i := range int(max(current, desired)) + 1 {
		name := fmt.Sprintf("ing-%d", i)
		in.Pods[name] = Pod{Name: name, Ordinal: i}
	}
	return in
}

// prepared records pods (by ordinal) prepared at the given times.
func prepared(at map[int]time.Time) []Record {
	var out []Record
	for ord := 10; ord >= 0; ord-- {
		if t, ok := at[ord]; ok {
			out = append(out, Record{Name: fmt.Sprintf("ing-%d", ord), PreparedAt: t})
		}
	}
	return out
}

// withUIDs gives every pod of in the UID "uid-<name>", and records of those
// pods in in.Previous the same one.
func withUIDs(in Input) Input {
	for name, pod := range in.Pods {
		pod.UID = "uid-" + name
		in.Pods[name] = pod
	}
	for i := range in.Previous {
		in.Previous[i].UID = "uid-" + in.Previous[i].Name
	}
	return in
}

func answersOf(records []Record) map[string]Record {
	m := map[string]Record{}
	for _, r := range records {
		m[r.Name] = r
	}
	return m
}

func TestCalls(t *testing.T) {
	tests := []struct {
		name        string
		in          Input
		wantPrepare []string
		wantCancel  []string
	}{{
		name:        "a new downscale prepares the removed pods, highest first",
		in:          sts(2, 5),
		wantPrepare: []string{"ing-4", "ing-3", "ing-2"},
	}, {
		name: "nothing changed and no pod became eligible: no call",
		in: func() Input {
			in := sts(2, 5)
			in.Previous = prepared(map[int]time.Time{4: now.Add(-time.Hour), 3: now.Add(-time.Hour), 2: now.Add(-time.Hour)})
			in.EarliestEligible = now.Add(3 * time.Hour)
			return in
		}(),
	}, {
		name: "a pod reaching eligibility: every removed pod is called to confirm",
		in: func() Input {
			in := sts(2, 5)
			in.Previous = prepared(map[int]time.Time{4: now.Add(-delay), 3: now.Add(-time.Hour), 2: now.Add(-time.Hour)})
			in.EarliestEligible = now
			return in
		}(),
		wantPrepare: []string{"ing-4", "ing-3", "ing-2"},
	}, {
		name: "a pod that answered an error is called again, alone",
		in: func() Input {
			in := sts(2, 4)
			in.Previous = []Record{{Name: "ing-3", Err: "500"}, {Name: "ing-2", PreparedAt: now.Add(-time.Hour)}}
			in.EarliestEligible = now.Add(3 * time.Hour)
			return in
		}(),
		wantPrepare: []string{"ing-3"},
	}, {
		name: "desired went up: pods that stay get DELETE, the rest are confirmed",
		in: func() Input {
			in := sts(3, 5)
			in.Previous = prepared(map[int]time.Time{4: now, 3: now, 2: now})
			return in
		}(),
		wantPrepare: []string{"ing-4", "ing-3"},
		wantCancel:  []string{"ing-2"},
	}, {
		name: "no downscale pending any more: every pod that stays gets DELETE, once",
		in: func() Input {
			in := sts(5, 5)
			in.Previous = prepared(map[int]time.Time{4: now, 3: now})
			return in
		}(),
		wantCancel: []string{"ing-0", "ing-1", "ing-2", "ing-3", "ing-4"},
	}, {
		name: "the downscale done: pods it removed, still terminating, get no DELETE",
		in: func() Input {
			in := sts(2, 2)
			in.Previous = prepared(map[int]time.Time{4: now, 3: now, 2: now})
			return in
		}(),
		wantCancel: []string{"ing-0", "ing-1"},
	}, {
		name: "idle and nothing recorded: no call",
		in:   sts(5, 5),
	}, {
		name: "an upscale above current cancels on every pod there is",
		in: func() Input {
			in := sts(7, 5)
			in.Previous = prepared(map[int]time.Time{4: now})
			return in
		}(),
		wantCancel: []string{"ing-0", "ing-1", "ing-2", "ing-3", "ing-4"},
	}, {
		name: "a pod recreated since it was prepared (another UID) is asked again, alone",
		in: func() Input {
			in := sts(2, 4)
			in.Previous = prepared(map[int]time.Time{3: now.Add(-time.Hour), 2: now.Add(-time.Hour)})
			in = withUIDs(in)
			in.Previous[0].UID = "uid-of-the-pod-before"
			in.EarliestEligible = now.Add(3 * time.Hour)
			return in
		}(),
		wantPrepare: []string{"ing-3"},
	}, {
		name: "a pod asked and never answered (a restart during the calls) is asked again",
		in: func() Input {
			in := sts(2, 4)
			in.Previous = []Record{{Name: "ing-3"}, {Name: "ing-2", PreparedAt: now.Add(-time.Hour)}}
			in = withUIDs(in)
			in.EarliestEligible = now.Add(3 * time.Hour)
			return in
		}(),
		wantPrepare: []string{"ing-3"},
	}, {
		name: "cancelled after a restart during the calls: every pod, the ones asked among them, gets DELETE",
		in: func() Input {
			in := sts(4, 4)
			in.Previous = []Record{{Name: "ing-3"}, {Name: "ing-2"}}
			return withUIDs(in)
		}(),
		wantCancel: []string{"ing-0", "ing-1", "ing-2", "ing-3"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Calls(tt.in)
			if !slices.Equal(p.Prepare, tt.wantPrepare) || !slices.Equal(p.Cancel, tt.wantCancel) {
				t.Errorf("Prepare %v Cancel %v, want %v %v", p.Prepare, p.Cancel, tt.wantPrepare, tt.wantCancel)
			}
		})
	}
}

func TestDecide(t *testing.T) {
	tests := []struct {
		name         string
		in           Input
		answers      []Record
		wantEligible *int32
		wantEarliest time.Time
		wantError    string
		wantRequeue  time.Duration
	}{{
		name:         "freshly prepared: nothing eligible, look again when the first is",
		in:           sts(2, 5),
		answers:      prepared(map[int]time.Time{4: now, 3: now, 2: now.Add(-time.Minute)}),
		wantEligible: ptr.To[int32](5), wantEarliest: now.Add(delay - time.Minute), wantRequeue: delay - time.Minute,
	}, {
		name:         "exactly at the delay: eligible",
		in:           sts(2, 5),
		answers:      prepared(map[int]time.Time{4: now.Add(-delay), 3: now.Add(-delay), 2: now.Add(-delay)}),
		wantEligible: ptr.To[int32](2),
	}, {
		name:         "one nanosecond short of the delay: not eligible",
		in:           sts(4, 5),
		answers:      prepared(map[int]time.Time{4: now.Add(-delay + time.Nanosecond)}),
		wantEligible: ptr.To[int32](5), wantEarliest: now.Add(time.Nanosecond), wantRequeue: time.Nanosecond,
	}, {
		name:         "partial downscale: the top pods are eligible, a lower one is not yet",
		in:           sts(2, 5),
		answers:      prepared(map[int]time.Time{4: now.Add(-5 * time.Hour), 3: now.Add(-5 * time.Hour), 2: now.Add(-time.Hour)}),
		wantEligible: ptr.To[int32](3), wantEarliest: now.Add(3 * time.Hour), wantRequeue: 3 * time.Hour,
	}, {
		name:         "a lower pod eligible does not help while a higher one is not",
		in:           sts(2, 5),
		answers:      prepared(map[int]time.Time{4: now, 3: now.Add(-5 * time.Hour), 2: now.Add(-5 * time.Hour)}),
		wantEligible: ptr.To[int32](5), wantEarliest: now.Add(delay), wantRequeue: delay,
	}, {
		name:    "a pod error holds everything below it, and is retried soon",
		in:      sts(2, 5),
		answers: []Record{{Name: "ing-4", PreparedAt: now.Add(-5 * time.Hour)}, {Name: "ing-3", Err: "answered 500"}, {Name: "ing-2", PreparedAt: now.Add(-5 * time.Hour)}},
		// ing-4 may go; ing-3 holds ing-3 and ing-2.
		wantEligible: ptr.To[int32](4), wantError: "ing-3: answered 500", wantRequeue: RetryAfterError,
	}, {
		name:         "a timestamp in the future (clock skew) is an error",
		in:           sts(4, 5),
		answers:      prepared(map[int]time.Time{4: now.Add(2 * time.Hour)}),
		wantEligible: ptr.To[int32](5), wantError: "in the future", wantRequeue: RetryAfterError,
	}, {
		name:         "a timestamp slightly ahead (within the skew allowed) waits the delay from it",
		in:           sts(4, 5),
		answers:      prepared(map[int]time.Time{4: now.Add(30 * time.Second)}),
		wantEligible: ptr.To[int32](5), wantEarliest: now.Add(30*time.Second + delay), wantRequeue: 30*time.Second + delay,
	}, {
		name:         "a zero timestamp is an error",
		in:           sts(4, 5),
		answers:      []Record{{Name: "ing-4", PreparedAt: time.Unix(0, 0)}},
		wantEligible: ptr.To[int32](5), wantError: "zero timestamp", wantRequeue: RetryAfterError,
	}, {
		name: "a pod without an address is an error",
		in: func() Input {
			in := sts(4, 5)
			in.Pods["ing-4"] = Pod{Name: "ing-4", Ordinal: 4, AddressError: "the pod has no IP yet"}
			return in
		}(),
		answers:      []Record{{Name: "ing-4", Err: "the pod has no IP yet"}},
		wantEligible: ptr.To[int32](5), wantError: "no IP", wantRequeue: RetryAfterError,
	}, {
		name: "a missing pod holds the downscale",
		in: func() Input {
			in := sts(3, 4)
			delete(in.Pods, "ing-3")
			return in
		}(),
		wantEligible: ptr.To[int32](4), wantError: "does not exist", wantRequeue: RetryAfterError,
	}, {
		name: "records from status stand in for pods not called",
		in: func() Input {
			in := sts(3, 5)
			in.Previous = prepared(map[int]time.Time{4: now.Add(-5 * time.Hour), 3: now.Add(-5 * time.Hour)})
			return in
		}(),
		wantEligible: ptr.To[int32](3),
	}, {
		name: "no downscale pending: nothing eligible to report",
		in:   sts(5, 5),
	}, {
		name: "a record of a pod since recreated (another UID) is not eligible",
		in: func() Input {
			in := sts(2, 4)
			in.Previous = prepared(map[int]time.Time{3: now.Add(-5 * time.Hour), 2: now.Add(-5 * time.Hour)})
			in = withUIDs(in)
			in.Previous[1].UID = "uid-of-the-pod-before"
			return in
		}(),
		// ing-3 may go; the new ing-2 has not been prepared.
		wantEligible: ptr.To[int32](3), wantError: "ing-2: the pod was recreated", wantRequeue: RetryAfterError,
	}, {
		name:         "asked and not answered yet (status written before the calls): neither eligible nor an error",
		in:           withUIDs(sts(2, 4)),
		answers:      []Record{{Name: "ing-3", UID: "uid-ing-3", PreparedAt: now.Add(-5 * time.Hour)}, {Name: "ing-2", UID: "uid-ing-2"}},
		wantEligible: ptr.To[int32](3),
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Decide(tt.in, answersOf(tt.answers))
			if (p.Eligible == nil) != (tt.wantEligible == nil) || p.Eligible != nil && *p.Eligible != *tt.wantEligible {
				t.Errorf("Eligible = %v, want %v", deref(p.Eligible), deref(tt.wantEligible))
			}
			if !p.EarliestEligible.Equal(tt.wantEarliest) {
				t.Errorf("EarliestEligible = %s, want %s", p.EarliestEligible, tt.wantEarliest)
			}
			if tt.wantError == "" && len(p.Errors) > 0 || !strings.Contains(p.Summary(), tt.wantError) {
				t.Errorf("errors %q, want %q", p.Summary(), tt.wantError)
			}
			if p.RequeueAfter != tt.wantRequeue {
				t.Errorf("RequeueAfter = %s, want %s", p.RequeueAfter, tt.wantRequeue)
			}
		})
	}
}

// Before any pod is called, status must name every pod asked that it does
// not hold yet for its current UID: a restart then still cancels them.
func TestIntent(t *testing.T) {
	tests := []struct {
		name string
		in   Input
		want []Record
	}{{
		name: "a new downscale: every pod asked, with its UID, and no answer",
		in:   withUIDs(sts(2, 4)),
		want: []Record{{Name: "ing-3", UID: "uid-ing-3"}, {Name: "ing-2", UID: "uid-ing-2"}},
	}, {
		name: "confirming pods status holds already: nothing to write first",
		in: func() Input {
			in := sts(2, 4)
			in.Previous = prepared(map[int]time.Time{3: now.Add(-delay), 2: now.Add(-time.Hour)})
			in.EarliestEligible = now
			return withUIDs(in)
		}(),
	}, {
		name: "a pod recreated since its record: it alone, under its new UID",
		in: func() Input {
			in := sts(2, 4)
			in.Previous = prepared(map[int]time.Time{3: now.Add(-time.Hour), 2: now.Add(-time.Hour)})
			in = withUIDs(in)
			in.Previous[1].UID = "uid-of-the-pod-before"
			return in
		}(),
		want: []Record{{Name: "ing-2", UID: "uid-ing-2"}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Intent(tt.in, Calls(tt.in))
			if len(got) != len(tt.want) {
				t.Fatalf("Intent = %v, want %v", got, tt.want)
			}
			for _, w := range tt.want {
				if got[w.Name] != w {
					t.Errorf("Intent[%s] = %+v, want %+v", w.Name, got[w.Name], w)
				}
			}
		})
	}
}

// A pod that no longer goes keeps its record in the status written before
// the calls, with the pod newly asked, until its DELETE is sent.
func TestCancelling(t *testing.T) {
	in := sts(3, 5)
	in.Previous = prepared(map[int]time.Time{3: now.Add(-time.Hour), 2: now.Add(-time.Hour)})
	in = withUIDs(in)
	calls := Calls(in)
	if !slices.Equal(calls.Prepare, []string{"ing-4", "ing-3"}) || !slices.Equal(calls.Cancel, []string{"ing-2"}) {
		t.Fatalf("calls %+v, want ing-4 and ing-3 asked, ing-2 cancelled", calls)
	}
	if got := Cancelling(in, calls); len(got) != 1 || got[0] != in.Previous[1] {
		t.Errorf("Cancelling = %+v, want the record of ing-2 %+v", got, in.Previous[1])
	}
	if got := Cancelling(in, CallPlan{Prepare: calls.Prepare}); len(got) != 0 {
		t.Errorf("Cancelling with no DELETE = %+v, want none", got)
	}
}

func deref(p *int32) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprint(*p)
}

// A StatefulSet whose ordinals start at 1 has pods ing-1 to ing-5 at five
// replicas; shrinking to two removes ing-5, ing-4 and ing-3, and keeps ing-1
// and ing-2, which must not stay prepared.
func TestOrdinalsStart(t *testing.T) {
	in := Input{Now: now, Delay: delay, Desired: ptr.To[int32](2), Current: 5, NamePrefix: "ing", OrdinalStart: 1, Pods: map[string]Pod{}}
	for ord := 1; ord <= 5; ord++ {
		name := fmt.Sprintf("ing-%d", ord)
		in.Pods[name] = Pod{Name: name, Ordinal: ord}
	}
	if got, want := Calls(in).Prepare, []string{"ing-5", "ing-4", "ing-3"}; !slices.Equal(got, want) {
		t.Errorf("prepare %v, want %v", got, want)
	}

	// Every removed pod prepared past the delay: the set may shrink to two.
	long := now.Add(-2 * delay)
	in.Previous = prepared(map[int]time.Time{5: long, 4: long, 3: long})
	plan := Decide(in, answersOf(in.Previous))
	if plan.Eligible == nil || *plan.Eligible != 2 || len(plan.Errors) > 0 {
		t.Errorf("eligible %s (errors %v), want 2", deref(plan.Eligible), plan.Errors)
	}
	// Only ing-5 prepared: nothing is eligible, since ing-5 is the first to go.
	in.Previous = prepared(map[int]time.Time{5: now})
	if plan := Decide(in, answersOf(in.Previous)); plan.Eligible == nil || *plan.Eligible != 5 {
		t.Errorf("with ing-5 just prepared, eligible %s, want 5", deref(plan.Eligible))
	}

	// ing-2, prepared by an earlier, deeper downscale, stays: it is cancelled.
	in.Previous = prepared(map[int]time.Time{5: long, 4: long, 3: long, 2: long})
	if got := Calls(in).Cancel; !slices.Equal(got, []string{"ing-2"}) {
		t.Errorf("cancel %v while shrinking to 2, want [ing-2]", got)
	}
	// No downscale pending any more: every pod that stays, ing-1 to ing-5, is
	// cancelled.
	in.Desired = ptr.To[int32](5)
	if got, want := Calls(in).Cancel, []string{"ing-1", "ing-2", "ing-3", "ing-4", "ing-5"}; !slices.Equal(got, want) {
		t.Errorf("cancel %v once no downscale is pending, want %v", got, want)
	}
}

// TestCancelRetries: a pod whose DELETE failed may still be prepared, so it
// is told again, with a backoff that doubles, until it answers or is gone
// (or recreated: a new pod is not prepared); until then status names it.
func TestCancelRetries(t *testing.T) {
	in := withUIDs(sts(3, 3)) // no downscale pending: the pods that stay are told to cancel
	in.Previous = []Record{{Name: "ing-2", UID: "uid-ing-2", PreparedAt: now.Add(-time.Hour)}}
	calls := Calls(in)
	if !slices.Equal(calls.Cancel, []string{"ing-0", "ing-1", "ing-2"}) {
		t.Fatalf("cancels %v, want every pod that stays", calls.Cancel)
	}
	retries := Retries(in, calls, map[string]string{"ing-2": "connection refused"})
	want := []CancelRetry{{Name: "ing-2", UID: "uid-ing-2", Attempts: 1, Err: "connection refused", Next: now.Add(RetryAfterError)}}
	if !slices.Equal(retries, want) {
		t.Fatalf("after a failed DELETE: retries %+v, want %+v", retries, want)
	}
	if d := RetryAfter(retries, now); d != RetryAfterError {
		t.Errorf("requeue after %s, want %s", d, RetryAfterError)
	}

	// The next passes have no records but the retry.
	in.Previous = nil
	in.Cancelling = retries
	in.Now = now.Add(RetryAfterError / 2)
	if calls := Calls(in); len(calls.Cancel) != 0 {
		t.Errorf("before the backoff ends: cancels %v, want none", calls.Cancel)
	}
	if got := Retries(in, Calls(in), nil); !slices.Equal(got, retries) {
		t.Errorf("before the backoff ends: retries %+v, want them kept", got)
	}
	in.Now = now.Add(RetryAfterError)
	calls = Calls(in)
	if !slices.Equal(calls.Cancel, []string{"ing-2"}) {
		t.Fatalf("once due: cancels %v, want ing-2 alone", calls.Cancel)
	}
	retries = Retries(in, calls, map[string]string{"ing-2": "timeout"})
	if len(retries) != 1 || retries[0].Attempts != 2 || retries[0].Err != "timeout" || !retries[0].Next.Equal(in.Now.Add(2*RetryAfterError)) {
		t.Fatalf("a second failure: retries %+v, want attempt 2, retried after %s", retries, 2*RetryAfterError)
	}

	in.Cancelling, in.Now = retries, retries[0].Next
	if got := Retries(in, Calls(in), nil); len(got) != 0 {
		t.Errorf("the pod answered: retries %+v, want none", got)
	}
	gone := in
	gone.Pods = map[string]Pod{"ing-0": in.Pods["ing-0"], "ing-1": in.Pods["ing-1"]}
	if calls := Calls(gone); len(calls.Cancel) != 0 || len(Retries(gone, calls, nil)) != 0 {
		t.Errorf("the pod is gone: cancels %v, want none and no retry", calls.Cancel)
	}
	recreated := withUIDs(sts(3, 3))
	recreated.Pods["ing-2"] = Pod{Name: "ing-2", UID: "another", Ordinal: 2}
	recreated.Cancelling, recreated.Now = retries, retries[0].Next
	if calls := Calls(recreated); len(calls.Cancel) != 0 || len(Retries(recreated, calls, nil)) != 0 {
		t.Errorf("the pod was recreated: cancels %v, want none and no retry", calls.Cancel)
	}
	if d := CancelBackoff(20); d != MaxCancelBackoff {
		t.Errorf("backoff after 20 attempts %s, want the cap %s", d, MaxCancelBackoff)
	}
}
