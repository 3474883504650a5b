package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// A step of the chain after detection: the first watch event (after the
// kill) that satisfies it marks it; its time is counted from the mark of
// after, the step that causes it.
type step struct {
	name, after, what string
}

// steps in the order they happen. Every mark is when the benchmark's watch
// delivered the change (about one watch delivery after the write), so the
// differences are exact to the jitter of one delivery, not a poll round.
var steps = []step{
	{"detected", "", "Ready not True on the hub's Cluster (cluster-health's status write)"},
	{"tainted", "detected", "NoExecute taint on the Cluster (cluster-taint's spec write)"},
	{"evicted", "tainted", "graceful eviction task on the binding (taint manager)"},
	{"placed", "evicted", "spec.clusters = member2(3) (scheduler)"},
	{"work", "placed", "member2's Work carries 3 replicas (binding controller)"},
	{"member-spec", "work", "member2's Deployment spec.replicas 3 (agent's apply)"},
	{"applied", "member-spec", "member2's Work Applied for its generation (agent's status write)"},
	{"available", "member-spec", "member2's Deployment 3/3 available (kube-controller-manager, kwok)"},
}

type event struct {
	at  time.Time
	obj runtime.Object
}

// recorder keeps every change of the watched objects with its arrival time.
type recorder struct {
	mu     sync.Mutex
	events []event
	// notify is signalled on every event.
	notify chan struct{}
}

func newRecorder() *recorder { return &recorder{notify: make(chan struct{}, 1)} }

func (r *recorder) add(obj runtime.Object) {
	now := time.Now()
	r.mu.Lock()
	r.events = append(r.events, event{now, obj})
	r.mu.Unlock()
	select {
	case r.notify <- struct{}{}:
	default:
	}
}

func (r *recorder) snapshot() []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// watchOne watches the object called name through lw from resourceVersion
// rv (a RetryWatcher: a closed watch is resumed, no change is missed) and
// records every change until ctx is done.
func (r *recorder) watchOne(ctx context.Context, lw *cache.ListWatch, rv string) error {
	w, err := watchtools.NewRetryWatcherWithContext(ctx, rv, lw)
	if err != nil {
		return err
	}
	go func() {
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					return
				}
				if ev.Type == watch.Added || ev.Type == watch.Modified {
					r.add(ev.Object)
				}
			}
		}
	}()
	return nil
}

func byName(name string) func(*metav1.ListOptions) {
	return func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
	}
}

// watchChain starts the watches of one failover: member1's Cluster, the
// binding, member2's Work on the hub, and member2's Deployment.
func watchChain(ctx context.Context, r *recorder, fc flotillaclient.Interface, member2 kubernetes.Interface, m1, m2 string) error {
	cl, err := fc.ClusterV1alpha1().Clusters().Get(ctx, m1, metav1.GetOptions{})
	if err != nil {
		return err
	}
	rb, err := fc.WorkV1alpha1().ResourceBindings(ns).Get(ctx, binding, metav1.GetOptions{})
	if err != nil {
		return err
	}
	workNS, workName := "flotilla-es-"+m2, workobjects.WorkName(ns, binding)
	wk, err := fc.WorkV1alpha1().Works(workNS).Get(ctx, workName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	d, err := member2.AppsV1().Deployments(ns).Get(ctx, "nginx", metav1.GetOptions{})
	if err != nil {
		return err
	}
	watches := []struct {
		lw *cache.ListWatch
		rv string
	}{
		{&cache.ListWatch{WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			byName(m1)(&o)
			return fc.ClusterV1alpha1().Clusters().Watch(ctx, o)
		}}, cl.ResourceVersion},
		{&cache.ListWatch{WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			byName(binding)(&o)
			return fc.WorkV1alpha1().ResourceBindings(ns).Watch(ctx, o)
		}}, rb.ResourceVersion},
		{&cache.ListWatch{WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			byName(workName)(&o)
			return fc.WorkV1alpha1().Works(workNS).Watch(ctx, o)
		}}, wk.ResourceVersion},
		{&cache.ListWatch{WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			byName("nginx")(&o)
			return member2.AppsV1().Deployments(ns).Watch(ctx, o)
		}}, d.ResourceVersion},
	}
	for _, w := range watches {
		if err := r.watchOne(ctx, w.lw, w.rv); err != nil {
			return err
		}
	}
	return nil
}

// marks finds each step's first event after since.
func marks(events []event, since time.Time, m1, m2 string) map[string]time.Time {
	out := map[string]time.Time{}
	mark := func(name string, at time.Time, ok bool) {
		if _, seen := out[name]; ok && !seen {
			out[name] = at
		}
	}
	for _, e := range events {
		if e.at.Before(since) {
			continue
		}
		switch o := e.obj.(type) {
		case *clusterv1alpha1.Cluster:
			mark("detected", e.at, !meta.IsStatusConditionTrue(o.Status.Conditions, clusterv1alpha1.ClusterConditionReady))
			mark("tainted", e.at, slices.ContainsFunc(o.Spec.Taints, func(t corev1.Taint) bool { return t.Effect == corev1.TaintEffectNoExecute }))
		case *workv1alpha1.ResourceBinding:
			mark("evicted", e.at, slices.ContainsFunc(o.Spec.GracefulEvictionTasks, func(t workv1alpha1.GracefulEvictionTask) bool { return t.FromCluster == m1 }))
			mark("placed", e.at, len(o.Spec.Clusters) == 1 && o.Spec.Clusters[0].Name == m2 && o.Spec.Clusters[0].Replicas == 3)
		case *workv1alpha1.Work:
			if hasReplicas(o, 3) {
				mark("work", e.at, true)
				applied := meta.FindStatusCondition(o.Status.Conditions, workv1alpha1.WorkConditionApplied)
				mark("applied", e.at, applied != nil && applied.Status == metav1.ConditionTrue && applied.ObservedGeneration == o.Generation)
			}
		case *appsv1.Deployment:
			three := o.Spec.Replicas != nil && *o.Spec.Replicas == 3
			mark("member-spec", e.at, three)
			mark("available", e.at, three && o.Status.AvailableReplicas == 3 && o.Status.ObservedGeneration == o.Generation)
		}
	}
	return out
}

// stepTimes turns marks into each step's duration after the step that
// causes it, and "after detection" (detected → available).
func stepTimes(m map[string]time.Time) (map[string]time.Duration, error) {
	out := map[string]time.Duration{}
	for _, s := range steps {
		at, ok := m[s.name]
		if !ok {
			return nil, fmt.Errorf("no %s seen", s.name)
		}
		if s.after != "" {
			out[s.name] = at.Sub(m[s.after])
		}
	}
	out["after detection"] = m["available"].Sub(m["detected"])
	return out, nil
}

// hasReplicas: the Work's first manifest asks for n replicas.
func hasReplicas(w *workv1alpha1.Work, n int64) bool {
	if len(w.Spec.Workload.Manifests) == 0 {
		return false
	}
	var m struct {
		Spec struct {
			Replicas int64 `json:"replicas"`
		} `json:"spec"`
	}
	return json.Unmarshal(w.Spec.Workload.Manifests[0].Raw, &m) == nil && m.Spec.Replicas == n
}

// summary is "p50 (min–max)" of durations.
func summary(l []time.Duration) string {
	l = slices.Clone(l)
	sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
	return fmt.Sprintf("%s (%s–%s)", ms(median(l)), ms(l[0]), ms(l[len(l)-1]))
}

func median(sorted []time.Duration) time.Duration {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

func ms(d time.Duration) string {
	if d >= time.Second {
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
	return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000)
}

// timeline prints every change seen from since (--timeline): arrival,
// object, resourceVersion, generation and the field managers whose entry
// changed since the object's previous change (who wrote it).
func timeline(events []event, since time.Time) string {
	var b strings.Builder
	prev := map[string]map[string]string{}
	for _, e := range events {
		if e.at.Before(since) {
			continue
		}
		o, err := meta.Accessor(e.obj)
		if err != nil {
			continue
		}
		kind := fmt.Sprintf("%T", e.obj)
		kind = kind[strings.LastIndexByte(kind, '.')+1:]
		entries := map[string]string{}
		var writers []string
		for _, mf := range o.GetManagedFields() {
			k := mf.Manager + "/" + string(mf.Operation) + "/" + mf.Subresource
			v := ""
			if mf.FieldsV1 != nil {
				v = mf.FieldsV1.GetRawString()
			}
			if mf.Time != nil {
				v += mf.Time.String()
			}
			entries[k] = v
			if p, ok := prev[kind]; ok && p[k] != v {
				writers = append(writers, k)
			}
		}
		prev[kind] = entries
		fmt.Fprintf(&b, "  +%s %s rv=%s gen=%d by %v\n", ms(e.at.Sub(since)), kind, o.GetResourceVersion(), o.GetGeneration(), writers)
	}
	return b.String()
}
