// Package priorityqueue is a client-go workqueue whose keys come out
// highest priority first, ties in the order they arrived. It plugs into
// workqueue as the storage behind a rate-limited queue (workqueue.Queue),
// so deduplication, Done/Forget, AddAfter and the backoff of
// AddRateLimited stay client-go's: a key coming back from its delay or
// backoff is ordered by priority against everything else waiting, which
// is how Karmada's scheduler retries backed-off bindings (#7814).
//
// The priority of a key is read when it is pushed and again when it is
// added while it waits (workqueue calls Touch), so a binding whose
// priority changed is reordered; a key keeps its place among equals.
package priorityqueue

import (
	"container/heap"

	"k8s.io/client-go/util/workqueue"
)

// PriorityFunc gives a key's priority: the higher, the sooner it is
// popped. It is called with the workqueue's lock held, so it must be quick
// and must not touch the queue (a lister read is fine).
type PriorityFunc func(key string) int32

// Queue is a workqueue.Queue[string] ordered by priority, then arrival.
// Like every workqueue.Queue it is called under the workqueue's lock and
// does not lock itself.
type Queue struct {
	priorityOf PriorityFunc
	items      items
	index      map[string]*item
	seq        uint64
}

var _ workqueue.Queue[string] = (*Queue)(nil)

// New returns an empty Queue reading priorities from priorityOf.
func New(priorityOf PriorityFunc) *Queue {
	return &Queue{priorityOf: priorityOf, index: map[string]*item{}}
}

type item struct {
	key      string
	priority int32
	seq      uint64 // arrival order among equal priorities
	pos      int    // position in the heap
}

// Push adds key, which workqueue guarantees is not in the queue.
func (q *Queue) Push(key string) {
	if it, ok := q.index[key]; ok { // not expected; keep one entry
		q.refresh(it)
		return
	}
	q.seq++
	it := &item{key: key, priority: q.priorityOf(key), seq: q.seq}
	q.index[key] = it
	heap.Push(&q.items, it)
}

// Touch re-reads the priority of key, which is waiting and was added
// again; it keeps its arrival.
func (q *Queue) Touch(key string) {
	if it, ok := q.index[key]; ok {
		q.refresh(it)
	}
}

func (q *Queue) refresh(it *item) {
	if p := q.priorityOf(it.key); p != it.priority {
		it.priority = p
		heap.Fix(&q.items, it.pos)
	}
}

// Len is the number of waiting keys.
func (q *Queue) Len() int { return len(q.items) }

// Pop removes and returns the key of highest priority, the earliest of
// equals. workqueue calls it only when Len() > 0.
func (q *Queue) Pop() string {
	it := heap.Pop(&q.items).(*item)
	delete(q.index, it.key)
	return it.key
}

// items is a max-heap by priority, then a min-heap by arrival.
type items []*item

func (h items) Len() int { return len(h) }
func (h items) Less(i, j int) bool {
	if h[i].priority != h[j].priority {
		return h[i].priority > h[j].priority
	}
	return h[i].seq < h[j].seq
}
func (h items) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].pos, h[j].pos = i, j
}
func (h *items) Push(x any) {
	it := x.(*item)
	it.pos = len(*h)
	*h = append(*h, it)
}
func (h *items) Pop() any {
	old := *h
	n := len(old)
	it := old[n-1]
	old[n-1] = nil
	*h = old[:n-1]
	return it
}

// NewRateLimitingQueue is workqueue's rate-limited queue named name (its
// metrics are the usual workqueue ones) with the default controller rate
// limiter, whose keys come out by priorityOf, ties in arrival order.
func NewRateLimitingQueue(name string, priorityOf PriorityFunc) workqueue.TypedRateLimitingInterface[string] {
	return NewRateLimitingQueueWithLimiter(name, priorityOf, workqueue.DefaultTypedControllerRateLimiter[string]())
}

// NewRateLimitingQueueWithLimiter is NewRateLimitingQueue with limiter.
func NewRateLimitingQueueWithLimiter(name string, priorityOf PriorityFunc, limiter workqueue.TypedRateLimiter[string]) workqueue.TypedRateLimitingInterface[string] {
	inner := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{Name: name, Queue: New(priorityOf)})
	delaying := workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[string]{Name: name, Queue: inner})
	return workqueue.NewTypedRateLimitingQueueWithConfig(limiter, workqueue.TypedRateLimitingQueueConfig[string]{Name: name, DelayingQueue: delaying})
}
