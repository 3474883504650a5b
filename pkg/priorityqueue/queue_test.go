package priorityqueue

import (
	"flag"
	"fmt"
	"math/rand"
	"slices"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
)

var (
	propertySeed  = flag.Int64("priorityqueue-seed", 0, "replay one case of TestQueueProperty")
	propertyCases = flag.Int("priorityqueue-cases", 300, "cases of TestQueueProperty")
)

func priorities(m map[string]int32) PriorityFunc {
	return func(key string) int32 { return m[key] }
}

func drain(q *Queue) []string {
	var out []string
	for q.Len() > 0 {
		out = append(out, q.Pop())
	}
	return out
}

func TestQueueHigherFirstTiesInArrivalOrder(t *testing.T) {
	prio := map[string]int32{"low-1": -5, "mid-1": 0, "high-1": 1000, "mid-2": 0, "high-2": 1000, "low-2": -5, "unknown": 0}
	q := New(priorities(prio))
	for _, k := range []string{"low-1", "mid-1", "high-1", "mid-2", "unknown", "high-2", "low-2"} {
		q.Push(k)
	}
	want := []string{"high-1", "high-2", "mid-1", "mid-2", "unknown", "low-1", "low-2"}
	if got := drain(q); !slices.Equal(got, want) {
		t.Fatalf("popped %v, want %v", got, want)
	}
}

func TestQueueTouchReordersAndKeepsArrival(t *testing.T) {
	prio := map[string]int32{"a": 1, "b": 1, "c": 1}
	q := New(priorities(prio))
	for _, k := range []string{"a", "b", "c"} {
		q.Push(k)
	}
	prio["c"] = 5 // raised while waiting
	q.Touch("c")
	prio["a"] = 0 // lowered
	q.Touch("a")
	q.Touch("b") // unchanged: keeps its place
	q.Touch("gone")
	if got, want := drain(q), []string{"c", "b", "a"}; !slices.Equal(got, want) {
		t.Fatalf("popped %v, want %v", got, want)
	}
}

// TestRateLimitingQueueOrder: through client-go's rate-limited queue
// (dedup, AddAfter, AddRateLimited), keys waiting together come out by
// priority, and a key added again while waiting keeps one entry.
func TestRateLimitingQueueOrder(t *testing.T) {
	prio := map[string]int32{"low": 1, "high": 100, "mid": 50}
	q := NewRateLimitingQueue("", priorities(prio))
	defer q.ShutDown()
	q.Add("low")
	q.Add("mid")
	q.Add("low")
	q.Add("high")
	if q.Len() != 3 {
		t.Fatalf("Len %d, want 3", q.Len())
	}
	var got []string
	for range 3 {
		k, _ := q.Get()
		got = append(got, k)
		q.Done(k)
	}
	if want := []string{"high", "mid", "low"}; !slices.Equal(got, want) {
		t.Fatalf("popped %v, want %v", got, want)
	}
	// Backed-off retries: all three come back after their delays and are
	// taken by priority once they wait together.
	for _, k := range []string{"low", "mid", "high"} {
		q.AddRateLimited(k)
	}
	deadline := time.Now().Add(10 * time.Second)
	for q.Len() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of 3 retries came back", q.Len())
		}
		time.Sleep(time.Millisecond)
	}
	got = got[:0]
	for range 3 {
		k, _ := q.Get()
		got = append(got, k)
		q.Done(k)
		q.Forget(k)
	}
	if want := []string{"high", "mid", "low"}; !slices.Equal(got, want) {
		t.Fatalf("retries popped %v, want %v", got, want)
	}
}

// TestQueueProperty checks the queue against a model over seeded random
// sequences of Push, Touch (with priority changes) and Pop: every Pop
// returns the waiting key of highest current priority, the first to have
// arrived among equals (a touched key keeps its arrival), and Len is the
// number waiting. A failure prints the seed; -priorityqueue-seed=N replays.
func TestQueueProperty(t *testing.T) {
	seeds := []int64{*propertySeed}
	if *propertySeed == 0 {
		seeds = seeds[:0]
		for i := range *propertyCases {
			seeds = append(seeds, int64(i+1))
		}
	}
	for _, seed := range seeds {
		if err := propertyCase(seed); err != nil {
			t.Fatalf("seed %d: %v (replay: go test ./pkg/priorityqueue -run TestQueueProperty -priorityqueue-seed=%d)", seed, err, seed)
		}
	}
}

func propertyCase(seed int64) error {
	r := rand.New(rand.NewSource(seed))
	keys := 1 + r.Intn(40)
	levels := 1 + r.Intn(5)
	prio := map[string]int32{}
	for i := range keys {
		prio[fmt.Sprintf("k%02d", i)] = int32(r.Intn(levels)) - 1
	}
	q := New(priorities(prio))
	type entry struct {
		key     string
		arrival int
	}
	var model []entry // waiting keys in arrival order
	arrivals := 0
	for step := range 200 {
		key := fmt.Sprintf("k%02d", r.Intn(keys))
		waiting := slices.IndexFunc(model, func(e entry) bool { return e.key == key })
		switch op := r.Intn(4); {
		case op == 0 && waiting < 0:
			arrivals++
			model = append(model, entry{key, arrivals})
			q.Push(key)
		case op == 1 && waiting >= 0:
			if r.Intn(2) == 0 {
				prio[key] = int32(r.Intn(levels)) - 1
			}
			q.Touch(key)
		case op >= 2 && len(model) > 0:
			best := 0
			for i, e := range model {
				if prio[e.key] > prio[model[best].key] { // earlier arrival wins ties: strict >
					best = i
				}
			}
			want := model[best].key
			model = slices.Delete(model, best, best+1)
			if got := q.Pop(); got != want {
				return fmt.Errorf("step %d: popped %s (priority %d), want %s (priority %d)", step, got, prio[got], want, prio[want])
			}
		}
		if q.Len() != len(model) {
			return fmt.Errorf("step %d: Len %d, want %d", step, q.Len(), len(model))
		}
	}
	return nil
}

// FIFO ties are what workqueue's default queue gives; with one priority
// the Queue is that queue.
func TestQueueOnePriorityIsFIFO(t *testing.T) {
	q := New(func(string) int32 { return 7 })
	fifo := workqueue.DefaultQueue[string]()
	for i := range 100 {
		k := fmt.Sprint(i)
		q.Push(k)
		fifo.Push(k)
	}
	for q.Len() > 0 {
		if a, b := q.Pop(), fifo.Pop(); a != b {
			t.Fatalf("popped %s, FIFO %s", a, b)
		}
	}
}
