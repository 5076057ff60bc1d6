package budget

import (
	"context"
	"encoding/json"
	"hash/fnv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// A decision that admits a disruption is judged on a view of the pods that
// is not older than the record of intents it is judged with: a recorded
// pod the view does not show is then gone, not yet to come, and a pod the
// view shows untouched is untouched (disruption.fateOf). A live read of the
// pods is one way to know that. The other costs no request: an informer's
// store knows the resourceVersion of the last change it holds (client-go's
// LastStoreSyncResourceVersion, its watch's events and bookmarks), and
// resourceVersions of one API server's objects are ordered (the etcd
// revision). So a cache whose pods are at resourceVersion s holds every
// change of the pods up to s, and confirms a record whose intents were all
// decided on views no newer than s: the record's "need".
//
// The need of a record is the resourceVersion at which its content was
// first seen (RecordsSeen): its content was written then or before, and
// every intent in it was decided on a view read before its write. A later
// write of the holder that leaves the record as it was (a condition, a
// count) does not raise it. A record this process wrote itself needs only
// the view it was decided on: its intents carried over from the record read
// were covered by that view, and its own intent was decided on it.

// CacheClock is the resourceVersion of the last change of the pods of
// namespace a cache holds; "" when it cannot say.
type CacheClock func(namespace string) string

// Covers reports whether pods at resourceVersion have (a cache's clock)
// hold every change up to need. An unknown or unparsable version covers
// nothing; an empty need is covered by anything known.
func Covers(have, need string) bool {
	if have == "" {
		return false
	}
	if need == "" {
		return true
	}
	c, err := resourceversion.CompareResourceVersion(have, need)
	return err == nil && c >= 0
}

// freshPoll is how often WaitCovered looks at the clock again.
const freshPoll = time.Millisecond

// WaitCovered waits, at most wait, for clock to cover need, and returns
// the clock's version once it does, or "" when it did not in time (or ctx
// ended): the caller then reads live. The wait is for the act of the
// record's last writer to reach the cache (an eviction admitted a moment
// ago, a rollout's deletes), which takes milliseconds.
func WaitCovered(ctx context.Context, clock CacheClock, namespace, need string, wait time.Duration) string {
	if clock == nil {
		return ""
	}
	deadline := time.Now().Add(wait)
	for {
		if have := clock(namespace); Covers(have, need) {
			return have
		}
		if !time.Now().Before(deadline) || ctx.Err() != nil {
			return ""
		}
		time.Sleep(freshPoll)
	}
}

// RecordsSeen keeps, per holder (by UID), the digest of the record of
// intents last seen in it and the resourceVersion that record needs a view
// of the pods to be as new as. Safe for concurrent use.
type RecordsSeen struct {
	byUID sync.Map // types.UID -> seenRecord
}

type seenRecord struct {
	digest uint64
	need   string
}

// Observe notes holder as a watch delivered it: when its record differs
// from the one last seen, the record needs views from holder's
// resourceVersion on.
func (s *RecordsSeen) Observe(holder Holder) {
	d := recordDigest(holder.DisruptionHold())
	if e, ok := s.byUID.Load(holder.GetUID()); ok && e.(seenRecord).digest == d {
		return
	}
	s.byUID.Store(holder.GetUID(), seenRecord{digest: d, need: holder.GetResourceVersion()})
}

// Wrote notes that this process wrote holder's record as holder now holds
// it (the API server's answer), deciding on a view of the pods at viewRV:
// the record needs views from viewRV on. An empty viewRV (a view read
// live, whose version the caller did not keep) needs holder's own.
func (s *RecordsSeen) Wrote(holder Holder, viewRV string) {
	need := viewRV
	if need == "" {
		need = holder.GetResourceVersion()
	}
	s.byUID.Store(holder.GetUID(), seenRecord{digest: recordDigest(holder.DisruptionHold()), need: need})
}

// Forget drops what is kept of the holder with that UID (deleted).
func (s *RecordsSeen) Forget(uid types.UID) { s.byUID.Delete(uid) }

// Need is the resourceVersion a view of the pods must have reached to be
// judged with holder's record: what was noted for that record, or else
// holder's own resourceVersion; "" for a record of no intent, which any
// view may be judged with: a view older than the record may only show
// pods of intents since seen done (their pods replaced and available, as
// they are now) still going, which refuses longer, or not yet taken, which
// they are not any more; a disruption nobody recorded is not ordered by
// the budget whatever the view.
func (s *RecordsSeen) Need(holder Holder) string {
	if h := holder.DisruptionHold(); h == nil || len(h.Intents) == 0 {
		return ""
	}
	if e, ok := s.byUID.Load(holder.GetUID()); ok && e.(seenRecord).digest == recordDigest(holder.DisruptionHold()) {
		return e.(seenRecord).need
	}
	return holder.GetResourceVersion()
}

// recordDigest is a hash of the record's content.
func recordDigest(h *v1alpha1.DisruptionHold) uint64 {
	f := fnv.New64a()
	if h != nil {
		raw, _ := json.Marshal(h) // a struct of strings, times and slices: never fails
		_, _ = f.Write(raw)
	}
	return f.Sum64()
}
