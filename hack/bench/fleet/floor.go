package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/flotilla-io/flotilla/e2e/framework"
	"github.com/flotilla-io/flotilla/hack/bench/benchutil"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/hub/clusterlifecycle"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// The floors' objects: templates and bindings in floorNamespace, Works in
// the namespaces of clusters that do not exist (flotilla-es-ffloor-NNN),
// so that no simulated agent and, once it is back, no hub touches them;
// all deleted before the hub starts again.
const (
	floorNamespace = "bench-fleet-floor"
	floorLabel     = "fleet.bench/floor"
)

func floorCluster(i int) string { return fmt.Sprintf("ffloor-%03d", i) }

const floorVictim = "ffloor-victim"

// floors is (d): the hub stopped, the same apiserver (loaded with the
// fleet as the hub left it, the simulated Leases still renewed) takes the
// writes on the critical paths of (a) and (b) from clients that cost
// nothing.
func (b *bench) floors(ctx context.Context) error {
	o := b.o
	want := o.clusters / groupSize
	b.log("(d) stopping the hub for the floors")
	if err := b.env.Ctl(ctx, "stop", "hub"); err != nil {
		return err
	}
	defer func() {
		b.log("(d) starting the hub again")
		if err := b.env.Ctl(context.Background(), "start", "hub"); err != nil {
			b.log("hub not started: %v", err)
		}
	}()
	namespaces := []string{floorNamespace, clusterlifecycle.Namespace(floorVictim)}
	for i := range want {
		namespaces = append(namespaces, clusterlifecycle.Namespace(floorCluster(i)))
	}
	for _, ns := range namespaces {
		if _, err := b.kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
			Labels: map[string]string{floorLabel: "yes"}}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	defer b.floorCleanup(namespaces)
	fmt.Printf("\n(d) Floors: the hub stopped, the same apiserver and fleet (Leases still renewed); load average %s\n", benchutil.LoadAverage())

	// (a)'s critical path: template, binding, placement, 100 Work creates
	// one after the other (the hub's binding controller renders a
	// binding's Works in one worker), each Work's status by its agent as
	// soon as it exists (32 agents' workers).
	fmt.Printf("\n(a) floor: template create, binding create, binding update (%d clusters), %d Work creates (serial, or 16 at once), each Work's status as soon as it exists\n\n", want, want)
	fmt.Printf("| run | Work creates | →binding placed | →%d Works exist | →all %d applied |\n|---|---|---|---|---|\n", want, want)
	var serial, parallel []time.Duration
	for run := range 2 * o.placements {
		workers := 1
		if run%2 == 1 {
			workers = 16
		}
		placed, exist, applied, err := b.floorPlacement(ctx, fmt.Sprintf("floor-hundred-%d", run), want, workers)
		if err != nil {
			return err
		}
		fmt.Printf("| %d | %d at once | %s | %s | %s |\n", run/2+1, workers, r3(placed), r3(exist), r3(applied))
		if workers == 1 {
			serial = append(serial, applied)
		} else {
			parallel = append(parallel, applied)
		}
	}
	s50, _, _ := percentiles(serial)
	p50, _, _ := percentiles(parallel)
	b.add("(d) floor of (a): the same writes, Works created serially (16 at once), median", fmt.Sprintf("%s (%s)", r3(s50), r3(p50)), "")

	// (b)'s critical path per workload moved: the eviction (binding
	// update: the victim out, a graceful eviction task), the placement
	// (binding update), the new Work, its status.
	n := o.victimWorkloads
	b.log("(d) making %d bindings with a Work on %s (not timed)", n, floorVictim)
	rbs := make([]*workv1alpha1.ResourceBinding, n)
	idx := make([]string, n)
	for i := range idx {
		idx[i] = strconv.Itoa(i)
	}
	var failed atomic.Int32
	benchutil.Parallel(idx, 32, func(s string) {
		i, _ := strconv.Atoi(s)
		rb, err := b.floorBinding(ctx, fmt.Sprintf("floor-app-%05d", i), []workv1alpha1.TargetCluster{{Name: floorVictim, Replicas: 1}})
		if err == nil {
			_, err = b.floorWork(ctx, rb, floorVictim)
		}
		if err != nil {
			failed.Add(1)
			b.log("floor setup: %v", err)
			return
		}
		rbs[i] = rb
	})
	if failed.Load() > 0 {
		return fmt.Errorf("floor setup failed")
	}
	fmt.Printf("\n(b) floor: per workload, binding update (eviction), binding update (placement), Work create, Work status; from the first write\n\n")
	fmt.Printf("| bindings at once | moved | p50 | p90 | last | writes/s |\n|---|---|---|---|---|---|\n")
	from := floorVictim
	var last10 time.Duration
	for round, workers := range []int{o.floorWorkers, 64} {
		l, wall, err := b.floorMove(ctx, rbs, from, round, workers)
		if err != nil {
			return err
		}
		q50, q90, worst := percentiles(l)
		fmt.Printf("| %d | %d | %s | %s | %s | %.0f |\n", workers, len(l), r3(q50), r3(q90), r3(worst), float64(4*len(l))/wall.Seconds())
		if round == 0 {
			last10 = worst
		}
		from = ""
	}
	b.add(fmt.Sprintf("(d) floor of (b): %d workloads moved, 4 writes each, %d at once (64 at once: see above)", n, o.floorWorkers), r3(last10), "")
	fmt.Printf("load average after the floors: %s\n", benchutil.LoadAverage())
	return nil
}

func (b *bench) floorTemplate(ctx context.Context, name string) (*workv1alpha1.ResourceTemplate, error) {
	raw, _ := json.Marshal(benchutil.Deployment(name, "fleet", "", 1))
	tmpl := &workv1alpha1.ResourceTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: floorNamespace},
		Spec: workv1alpha1.ResourceTemplateSpec{Manifest: workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: raw}}}}
	return b.fc.WorkV1alpha1().ResourceTemplates(floorNamespace).Create(ctx, tmpl, metav1.CreateOptions{})
}

// floorBinding creates a template and its binding as the detector makes
// it, then (if targets) the scheduler's placement.
func (b *bench) floorBinding(ctx context.Context, name string, targets []workv1alpha1.TargetCluster) (*workv1alpha1.ResourceBinding, error) {
	tmpl, err := b.floorTemplate(ctx, name)
	if err != nil {
		return nil, err
	}
	rb := &workv1alpha1.ResourceBinding{
		ObjectMeta: metav1.ObjectMeta{Name: workobjects.BindingName("Deployment", name), Namespace: floorNamespace,
			Labels:          map[string]string{workobjects.LabelPropagationPolicyNamespace: floorNamespace, workobjects.LabelPropagationPolicyName: "floor"},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(tmpl, workv1alpha1.SchemeGroupVersion.WithKind("ResourceTemplate"))}},
		Spec: workv1alpha1.ResourceBindingSpec{
			Resource: workv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: floorNamespace, Name: name, UID: tmpl.UID},
			Replicas: 1,
			ReplicaRequirements: &workv1alpha1.ReplicaRequirements{ResourceRequest: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}},
			Placement: &policyv1alpha1.Placement{
				ClusterAffinity: &policyv1alpha1.ClusterAffinity{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{groupLabel: "g000"}}},
				ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDivided,
					ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted}},
			ConflictResolution: policyv1alpha1.ConflictAbort,
			ApplyStrategy:      policyv1alpha1.ApplyStrategyServerSideApply,
		}}
	if rb, err = b.fc.WorkV1alpha1().ResourceBindings(floorNamespace).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	if len(targets) == 0 {
		return rb, nil
	}
	placement, _ := json.Marshal(rb.Spec.Placement)
	rb.ManagedFields = nil
	rb.Spec.Clusters = targets
	rb.Annotations = map[string]string{"scheduler.flotilla.io/placement": string(placement)}
	return b.fc.WorkV1alpha1().ResourceBindings(floorNamespace).Update(ctx, rb, metav1.UpdateOptions{})
}

// floorWork creates rb's Work for cluster, as the binding controller does.
func (b *bench) floorWork(ctx context.Context, rb *workv1alpha1.ResourceBinding, cluster string) (*workv1alpha1.Work, error) {
	raw, _ := json.Marshal(benchutil.Deployment(rb.Spec.Resource.Name, "fleet", floorNamespace, 1))
	w := &workv1alpha1.Work{
		ObjectMeta: metav1.ObjectMeta{Name: workobjects.WorkName(rb.Namespace, rb.Name), Namespace: clusterlifecycle.Namespace(cluster),
			Labels:     map[string]string{workobjects.LabelBindingUID: string(rb.UID)},
			Finalizers: []string{workv1alpha1.ExecutionFinalizer},
			Annotations: map[string]string{workobjects.AnnotationBindingName: rb.Name, workobjects.AnnotationBindingNamespace: rb.Namespace,
				workobjects.AnnotationCluster: cluster, workv1alpha1.AnnotationTemplateGeneration: "1"}},
		Spec: workv1alpha1.WorkSpec{Workload: workv1alpha1.WorkloadTemplate{Manifests: []workv1alpha1.Manifest{{RawExtension: runtime.RawExtension{Raw: raw}}}},
			ApplyStrategy: policyv1alpha1.ApplyStrategyServerSideApply, ConflictResolution: policyv1alpha1.ConflictAbort},
	}
	return b.fc.WorkV1alpha1().Works(w.Namespace).Create(ctx, w, metav1.CreateOptions{})
}

// floorStatus writes w's status as its agent does once it rolled out.
func (b *bench) floorStatus(ctx context.Context, w *workv1alpha1.Work) error {
	status, _ := framework.RolledOutStatus(w, metav1.Now())
	w = w.DeepCopy()
	w.Status = *status
	_, err := b.fc.WorkV1alpha1().Works(w.Namespace).UpdateStatus(ctx, w, metav1.UpdateOptions{})
	return err
}

// floorPlacement is one run of (a)'s writes; the times are from the
// template's create.
func (b *bench) floorPlacement(ctx context.Context, name string, clusters, workers int) (placed, exist, applied time.Duration, err error) {
	targets := make([]workv1alpha1.TargetCluster, clusters)
	for i := range targets {
		targets[i] = workv1alpha1.TargetCluster{Name: floorCluster(i), Replicas: 1}
	}
	t0 := time.Now()
	rb, err := b.floorBinding(ctx, name, targets)
	if err != nil {
		return 0, 0, 0, err
	}
	placed = time.Since(t0)
	statuses := make(chan *workv1alpha1.Work, clusters)
	var agents sync.WaitGroup
	var errs atomic.Int32
	for range 32 {
		agents.Add(1)
		go func() {
			defer agents.Done()
			for w := range statuses {
				if err := b.floorStatus(ctx, w); err != nil {
					errs.Add(1)
				}
			}
		}()
	}
	names := make([]string, clusters)
	for i := range names {
		names[i] = floorCluster(i)
	}
	benchutil.Parallel(names, workers, func(cluster string) {
		w, err := b.floorWork(ctx, rb, cluster)
		if err != nil {
			errs.Add(1)
			return
		}
		statuses <- w
	})
	exist = time.Since(t0)
	close(statuses)
	agents.Wait()
	applied = time.Since(t0)
	if n := errs.Load(); n > 0 {
		return 0, 0, 0, fmt.Errorf("%d writes of floor placement %s failed", n, name)
	}
	return placed, exist, applied, nil
}

// floorMove moves every binding from its cluster to another of the group
// (round-robin over 9 floor clusters), workers at once; each latency is
// from the first write of the whole round, as the hub's times are from
// when the evictions fall due.
func (b *bench) floorMove(ctx context.Context, rbs []*workv1alpha1.ResourceBinding, from string, round, workers int) ([]time.Duration, time.Duration, error) {
	idx := make([]string, len(rbs))
	for i := range idx {
		idx[i] = strconv.Itoa(i)
	}
	lat := make([]time.Duration, len(rbs))
	var errs atomic.Int32
	t0 := time.Now()
	benchutil.Parallel(idx, workers, func(s string) {
		i, _ := strconv.Atoi(s)
		rb := rbs[i]
		old := from
		if old == "" {
			old = rb.Spec.Clusters[0].Name
		}
		to := floorCluster(1 + (i+round)%9)
		move := func() error {
			// The taint manager: the old cluster into a graceful task.
			u := rb.DeepCopy()
			u.ManagedFields = nil
			u.Spec.Clusters = nil
			u.Spec.GracefulEvictionTasks = append(u.Spec.GracefulEvictionTasks[:0:0], workv1alpha1.GracefulEvictionTask{FromCluster: old, Replicas: ptr(int32(1)),
				Reason: "TaintUntolerated", Message: "cluster " + old + " has taint cluster.flotilla.io/unreachable:NoExecute", Producer: "taint-manager",
				CreationTimestamp: ptr(metav1.Now())})
			u, err := b.fc.WorkV1alpha1().ResourceBindings(floorNamespace).Update(ctx, u, metav1.UpdateOptions{})
			if err != nil {
				return err
			}
			// The scheduler: the new target.
			u.ManagedFields = nil
			u.Spec.Clusters = []workv1alpha1.TargetCluster{{Name: to, Replicas: 1}}
			if u, err = b.fc.WorkV1alpha1().ResourceBindings(floorNamespace).Update(ctx, u, metav1.UpdateOptions{}); err != nil {
				return err
			}
			// The binding controller's Work, and its agent's status.
			w, err := b.floorWork(ctx, u, to)
			if err != nil {
				return err
			}
			if err := b.floorStatus(ctx, w); err != nil {
				return err
			}
			rbs[i] = u
			return nil
		}
		if err := move(); err != nil {
			if errs.Add(1) <= 3 {
				b.log("floor move: %v", err)
			}
			return
		}
		lat[i] = time.Since(t0)
	})
	wall := time.Since(t0)
	if n := errs.Load(); n > 0 {
		return nil, 0, fmt.Errorf("%d floor moves failed", n)
	}
	return lat, wall, nil
}

func ptr[T any](v T) *T { return &v }

// floorCleanup deletes the floors' objects (Works first, their finalizer
// removed), waits for the bindings and templates to go, then deletes the
// namespaces, before the hub starts again.
func (b *bench) floorCleanup(namespaces []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	b.log("(d) deleting the floors' objects")
	for _, ns := range namespaces {
		list, err := b.fc.WorkV1alpha1().Works(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		names := make([]string, 0, len(list.Items))
		for _, w := range list.Items {
			names = append(names, w.Name)
		}
		benchutil.Parallel(names, 32, func(name string) {
			_, _ = b.fc.WorkV1alpha1().Works(ns).Patch(ctx, name, "application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
			_ = b.fc.WorkV1alpha1().Works(ns).Delete(ctx, name, metav1.DeleteOptions{})
		})
	}
	_ = b.fc.WorkV1alpha1().ResourceBindings(floorNamespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	_ = b.fc.WorkV1alpha1().ResourceTemplates(floorNamespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	// The hub may start once the bindings and templates are gone (it never
	// reads Works without a binding); the namespaces go in the background.
	_ = wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		rbs, err := b.fc.WorkV1alpha1().ResourceBindings(floorNamespace).List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil || len(rbs.Items) > 0 {
			return false, nil
		}
		tmpls, err := b.fc.WorkV1alpha1().ResourceTemplates(floorNamespace).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil && len(tmpls.Items) == 0, nil
	})
	for _, ns := range namespaces {
		_ = b.kc.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	}
}
