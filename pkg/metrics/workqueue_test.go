package metrics

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/client-go/util/workqueue"
)

// A named queue's depth, adds and retries reach a registry the workqueue
// metrics are registered on; what is being processed is not in the depth.
var runs int

func TestWorkqueueMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	RegisterWorkqueueMetrics(reg)
	// The series are the process's: a name of its own for each run (-count).
	runs++
	name := fmt.Sprintf("metrics-test-%d", runs)
	q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: name})
	defer q.ShutDown()
	q.Add("a")
	q.Add("b")
	q.Add("a") // already queued: not an add
	if got := queueValue(t, reg, "workqueue_depth", name); got != 2 {
		t.Errorf("depth = %v, want 2", got)
	}
	key, _ := q.Get()
	if got := queueValue(t, reg, "workqueue_depth", name); got != 1 {
		t.Errorf("depth with one key taken = %v, want 1", got)
	}
	if got := queueValue(t, reg, "workqueue_adds_total", name); got != 2 {
		t.Errorf("adds = %v, want 2", got)
	}
	q.AddRateLimited(key)
	q.Done(key)
	if got := queueValue(t, reg, "workqueue_retries_total", name); got != 1 {
		t.Errorf("retries = %v, want 1", got)
	}
}

// queueValue is the value of the series of family for the queue name.
func queueValue(t *testing.T, reg *prometheus.Registry, family, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != family {
			continue
		}
		for _, m := range mf.Metric {
			if !hasLabel(m, "name", name) {
				continue
			}
			switch {
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Counter != nil:
				return m.Counter.GetValue()
			}
		}
	}
	t.Fatalf("no %s{name=%q}", family, name)
	return 0
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.Label {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}
