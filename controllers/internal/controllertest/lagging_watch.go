package controllertest

import (
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
)

// laggingListerWatcher delays every watch event by lag, in order.
type laggingListerWatcher struct {
	toolscache.ListerWatcher
	lag time.Duration
}

func (l laggingListerWatcher) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	// The informer calls Watch on a ListerWatcher without a context, so
	// that is the method to delay.
	w, err := l.ListerWatcher.Watch(opts) //nolint:staticcheck // see above
	if err != nil {
		return nil, err
	}
	lw := &laggingWatch{inner: w, out: make(chan watch.Event), done: make(chan struct{})}
	go lw.relay(l.lag)
	return lw, nil
}

type laggingWatch struct {
	inner watch.Interface
	out   chan watch.Event
	done  chan struct{}
	once  sync.Once
}

// relay stamps each event as it arrives and hands it on lag later, so that a
// burst arrives as a burst, lag late.
func (l *laggingWatch) relay(lag time.Duration) {
	type stamped struct {
		ev watch.Event
		at time.Time
	}
	pending := make(chan stamped, 4096)
	go func() {
		defer close(pending)
		for ev := range l.inner.ResultChan() {
			select {
			case pending <- stamped{ev, time.Now()}:
			case <-l.done:
				return
			}
		}
	}()
	defer close(l.out)
	for s := range pending {
		select {
		case <-time.After(time.Until(s.at.Add(lag))):
		case <-l.done:
			return
		}
		select {
		case l.out <- s.ev:
		case <-l.done:
			return
		}
	}
}

func (l *laggingWatch) Stop() {
	l.once.Do(func() {
		close(l.done)
		l.inner.Stop()
	})
}

func (l *laggingWatch) ResultChan() <-chan watch.Event { return l.out }
