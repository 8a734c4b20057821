package api

import (
	"context"
	"fmt"
	"net/http"
	"sync"
)

// admission lets at most max requests generate at once and at most queue
// more wait for a slot; a request beyond both is refused (429) at once
// rather than left waiting without bound.
type admission struct {
	slots chan struct{}
	queue int
	m     *metrics

	mu      sync.Mutex
	waiting int
}

func newAdmission(max, queue int, m *metrics) *admission {
	return &admission{slots: make(chan struct{}, max), queue: queue, m: m}
}

// acquire takes a slot, waiting in the queue if there is room there. The
// caller must call release once done.
func (a *admission) acquire(ctx context.Context) (release func(), _ *apiError) {
	release = func() {
		<-a.slots
		a.m.active.Dec()
	}
	select {
	case a.slots <- struct{}{}:
		a.m.active.Inc()
		return release, nil
	default:
	}
	a.mu.Lock()
	if a.waiting >= a.queue {
		a.mu.Unlock()
		a.m.rejected.Inc()
		return nil, &apiError{Status: http.StatusTooManyRequests, Type: typeRateLimit, Code: ptr("rate_limit_exceeded"),
			Message: fmt.Sprintf("server busy: %d requests are generating and %d are queued, the limits (--max-concurrent %d, --queue %d); retry later",
				cap(a.slots), a.waiting, cap(a.slots), a.queue)}
	}
	a.waiting++
	a.m.queued.Inc()
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.waiting--
		a.m.queued.Dec()
		a.mu.Unlock()
	}()
	select {
	case a.slots <- struct{}{}:
		a.m.active.Inc()
		return release, nil
	case <-ctx.Done():
		return nil, &apiError{Status: 499, Message: "client closed the request while it was queued"}
	}
}
