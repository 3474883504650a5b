// Command apiserverfloor measures the floor the hub's kube-apiserver sets
// under the propagation benchmark (hack/bench/propagation): with no hub
// running, it replays the writes the pipeline makes per ResourceTemplate,
// with objects shaped and sized like the hub's, as fast as the apiserver
// takes them, and prints how long that took. Per template, in order (with
// --spread 2):
//
//  1. the template's create (the user),
//  2. its binding's create (the detector: policy labels, ownerReference),
//  3. the binding's Update of spec.clusters (the scheduler, which also sets
//     the scheduler.flotilla.io/placement annotation then),
//  4. 5. a Work create per target cluster (the binding controller),
//  6. 7. a Work UpdateStatus per target cluster (the agents: Applied and
//     Available, manifestStatuses),
//  8. a JSON merge patch of the binding's status subresource (conditions,
//     aggregatedStatus, schedulingDecision), by workobjects.Bindings.PatchStatus
//     as the hub's,
//  9. the template's UpdateStatus (the detector's mirror of the binding).
//
// Writes 1–7 are the critical path (every Work applied), 8–9 statuses.
// --workers goroutines each take the next template and make its writes one
// after the other, as the pipeline would if the hub and the agents cost
// nothing. It prints the writes per second, when every template's critical
// path and all its writes were done, each kind of write's latency and
// request size, the apiserver's RSS and CPU (from its /metrics) and the
// load average, then deletes everything (and says how long that took).
// --statuses=false makes writes 1–7 only: the floor under "every Work
// applied" if the statuses were all written after it.
//
// The Works go to namespaces flotilla-es-floor-NNN (no Cluster objects are
// made), so no agent touches them. The hub must be stopped first, or its
// detector would react to the templates, and started again after:
//
//	bash hack/local-ctl.sh stop hub
//	go run ./hack/bench/apiserverfloor --templates 10000 --clusters 100 --workers 64
//	bash hack/local-ctl.sh start hub
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/flotilla-io/flotilla/e2e/framework"
	"github.com/flotilla-io/flotilla/hack/bench/benchutil"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla-io/flotilla/pkg/hub/clusterlifecycle"
	"github.com/flotilla-io/flotilla/pkg/hub/detector"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

const (
	benchLabel    = "flotilla.io/bench"
	benchValue    = "apiserverfloor"
	clusterPrefix = "floor-"
	maxRegions    = 10
	// replicas of each Deployment, divided over the target clusters.
	replicas = 4
)

// The kinds of write, in a template's order.
const (
	templateCreate = iota
	bindingCreate
	bindingUpdate
	workCreate
	workStatus
	bindingStatus
	templateStatus
	kinds
)

var kindNames = [kinds]string{"template create", "binding create", "binding update (spec.clusters)", "Work create",
	"Work status (agent)", "binding status merge patch", "template status"}

type floor struct {
	fc        flotillaclient.Interface
	bindings  *workobjects.Bindings
	ns        string
	templates int
	spread    int
	statuses  bool // also writes 8 and 9
	// unselected caps the unselected clusters of a decision (the
	// scheduler's cap unless lowered to measure what decisions cost).
	unselected int
	clusters   []string // cluster names, floor-NNN
	regions    int
	// per template: when its first write started, its critical path
	// (every Work's status) and its last write ended.
	start, critical, done []time.Time
	// lat[k] holds every write of kind k, perTemplate(k) per template.
	lat [kinds][]time.Duration
	// size[k] is the JSON body of template 0's first write of kind k.
	size   [kinds]int
	writes atomic.Int64
	errs   atomic.Int64
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", benchutil.KubeconfigUsage)
	hubContext := flag.String("context", "flotilla-hub", "hub context")
	qps := flag.Float64("qps", 5000, "client QPS (high: the client should never throttle)")
	burst := flag.Int("burst", 10000, "client burst")
	workers := flag.Int("workers", 64, "templates written at once")
	templates := flag.Int("templates", 10000, "ResourceTemplates")
	clusters := flag.Int("clusters", 100, "simulated clusters (in up to 10 regions); one Work namespace each")
	spread := flag.Int("spread", 2, "clusters per binding (Works per template)")
	ns := flag.String("namespace", "bench-apiserverfloor", "namespace of the templates and bindings")
	cleanup := flag.Bool("cleanup", true, "delete everything at the end")
	statuses := flag.Bool("statuses", true, "also make the status writes 8 and 9 (false: the critical path only)")
	unselected := flag.Int("unselected", workv1alpha1.MaxUnselectedClusterDecisions, "unselected clusters listed in each binding's scheduling decision (default: the scheduler's cap; lower it to measure what the decision costs)")
	flag.Parse()
	err := run(*kubeconfig, *hubContext, *qps, *burst, *workers, *templates, *clusters, *spread, *ns, *cleanup, *statuses, *unselected)
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, hubContext string, qps float64, burst, workers, templates, clusters, spread int, ns string, cleanup, statuses bool, unselected int) error {
	regions := min(maxRegions, clusters)
	if templates < 1 || workers < 1 || clusters < 1 || spread < 1 || spread > clusters/regions {
		return fmt.Errorf("need --templates, --workers, --clusters >= 1 and 1 <= --spread <= clusters per region (%d)", clusters/max(regions, 1))
	}
	cfg, err := benchutil.HubConfig(kubeconfig, hubContext)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = float32(qps), burst
	kc := kubernetes.NewForConfigOrDie(cfg)
	fc := flotillaclient.NewForConfigOrDie(cfg)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	f := &floor{fc: fc, bindings: &workobjects.Bindings{Client: fc}, ns: ns, templates: templates, spread: spread, statuses: statuses, unselected: unselected, regions: regions,
		start: make([]time.Time, templates), critical: make([]time.Time, templates), done: make([]time.Time, templates)}
	for k := range kinds {
		f.lat[k] = make([]time.Duration, templates*f.perTemplate(k))
	}
	namespaces := []string{ns}
	for c := range clusters {
		f.clusters = append(f.clusters, fmt.Sprintf("%s%03d", clusterPrefix, c))
		namespaces = append(namespaces, clusterlifecycle.Namespace(f.clusters[c]))
	}
	for _, n := range namespaces {
		if err := ensureNamespace(ctx, kc, n); err != nil {
			return err
		}
	}
	if left, err := fc.WorkV1alpha1().ResourceTemplates(ns).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		return err
	} else if len(left.Items) > 0 {
		return fmt.Errorf("namespace %s already holds ResourceTemplates (a run with --cleanup=false?); delete it first", ns)
	}

	rssBefore, cpuBefore := apiserverProcess(ctx, kc)
	fmt.Fprintf(os.Stderr, "load average before: %s\n", benchutil.LoadAverage())
	next := atomic.Int64{}
	t0 := time.Now()
	progress, stopProgress := context.WithCancel(ctx)
	go f.progress(progress, t0)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= templates {
					return
				}
				if err := f.template(ctx, i); err != nil {
					f.fail(err)
				}
			}
		}()
	}
	wg.Wait()
	wall := time.Since(t0)
	stopProgress()
	fmt.Fprintf(os.Stderr, "load average after: %s\n", benchutil.LoadAverage())
	rssAfter, cpuAfter := apiserverProcess(context.Background(), kc)
	f.report(t0, wall, workers)
	if rssBefore > 0 && rssAfter > 0 {
		fmt.Printf("apiserver: RSS before %.0f MiB, after %.0f MiB; CPU during %.1f s\n", rssBefore/(1<<20), rssAfter/(1<<20), cpuAfter-cpuBefore)
	}
	if !cleanup {
		fmt.Printf("left in place (--cleanup=false): namespaces %s and %s…%s\n", ns, namespaces[1], namespaces[len(namespaces)-1])
		return nil
	}
	stop() // a second interrupt ends the cleanup too
	return f.cleanup(kc, namespaces, workers)
}

func (f *floor) perTemplate(k int) int {
	switch {
	case k == workCreate || k == workStatus:
		return f.spread
	case !f.statuses && (k == bindingStatus || k == templateStatus):
		return 0
	}
	return 1
}

// write times call as the j-th write of kind k of template i, and records
// the JSON size of body for template 0.
func (f *floor) write(i, k, j int, body any, call func() error) error {
	start := time.Now()
	err := call()
	f.lat[k][i*f.perTemplate(k)+j] = time.Since(start)
	if err != nil {
		return fmt.Errorf("%s %d of template %d: %w", kindNames[k], j, i, err)
	}
	f.writes.Add(1)
	if i == 0 && j == 0 {
		b, _ := json.Marshal(body)
		f.size[k] = len(b)
	}
	return nil
}

// template makes template i's writes, in the pipeline's order.
func (f *floor) template(ctx context.Context, i int) error {
	name := fmt.Sprintf("app-%05d", i)
	region := fmt.Sprintf("region-%d", i%f.regions)
	targets := f.targets(i)
	f.start[i] = time.Now()

	// 1. The user's template.
	raw, _ := json.Marshal(benchutil.Deployment(name, region, "", replicas))
	tmpl := &workv1alpha1.ResourceTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns},
		Spec: workv1alpha1.ResourceTemplateSpec{Manifest: workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: raw}}}}
	if err := f.write(i, templateCreate, 0, tmpl, func() (err error) {
		tmpl, err = f.fc.WorkV1alpha1().ResourceTemplates(f.ns).Create(ctx, tmpl, metav1.CreateOptions{})
		return err
	}); err != nil {
		return err
	}

	// 2. The detector's binding. The hub's also carries the finalizer
	// flotilla.io/binding-controller (a few bytes); left out here so that
	// cleanup is a plain delete.
	rb := binding(tmpl, region, f.spread)
	if err := f.write(i, bindingCreate, 0, rb, func() (err error) {
		rb, err = f.fc.WorkV1alpha1().ResourceBindings(f.ns).Create(ctx, rb, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			err = fmt.Errorf("%w (is the hub running? stop it first: bash hack/local-ctl.sh stop hub)", err)
		}
		return err
	}); err != nil {
		return err
	}

	// 3. The scheduler's placement, with the placement it scheduled by
	// (pkg/hub/scheduler: the annotation goes with spec.clusters). The hub
	// writes from its cache, which drops managedFields (cachetransform).
	placement, _ := json.Marshal(rb.Spec.Placement)
	rb.ManagedFields = nil
	rb.Spec.Clusters = targets
	rb.Annotations = map[string]string{"scheduler.flotilla.io/placement": string(placement)}
	if err := f.write(i, bindingUpdate, 0, rb, func() (err error) {
		rb, err = f.fc.WorkV1alpha1().ResourceBindings(f.ns).Update(ctx, rb, metav1.UpdateOptions{})
		return err
	}); err != nil {
		return err
	}

	// 4.–5. The binding controller's Works, one per target cluster.
	works := make([]*workv1alpha1.Work, len(targets))
	for j, t := range targets {
		works[j] = work(rb, tmpl, t, region)
		if err := f.write(i, workCreate, j, works[j], func() (err error) {
			works[j], err = f.fc.WorkV1alpha1().Works(works[j].Namespace).Create(ctx, works[j], metav1.CreateOptions{})
			return err
		}); err != nil {
			return err
		}
	}

	// 6.–7. The agents' reports: applied and rolled out. An agent writes
	// from its own informer's copy: the whole Work, managedFields included.
	for j, w := range works {
		status, _ := framework.RolledOutStatus(w, metav1.Now())
		w.Status = *status
		if err := f.write(i, workStatus, j, w, func() error {
			_, err := f.fc.WorkV1alpha1().Works(w.Namespace).UpdateStatus(ctx, w, metav1.UpdateOptions{})
			return err
		}); err != nil {
			return err
		}
	}
	f.critical[i] = time.Now()
	if !f.statuses {
		f.done[i] = f.critical[i]
		return nil
	}

	// 8. The binding's status, as the binding controller and the scheduler
	// leave it, in one merge patch of the status subresource.
	updated := rb.DeepCopy()
	updated.Status = bindingStatusOf(rb, works, f.decision(i, targets))
	if err := f.write(i, bindingStatus, 0, map[string]any{"metadata": map[string]any{"resourceVersion": rb.ResourceVersion}, "status": updated.Status}, func() error {
		_, err := f.bindings.PatchStatus(ctx, rb, updated)
		return err
	}); err != nil {
		return err
	}

	// 9. The detector's mirror of the binding on the template (from its
	// cache, without managedFields).
	tmpl.ManagedFields = nil
	tmpl.Status = templateStatusOf(tmpl, updated)
	if err := f.write(i, templateStatus, 0, tmpl, func() error {
		_, err := f.fc.WorkV1alpha1().ResourceTemplates(f.ns).UpdateStatus(ctx, tmpl, metav1.UpdateOptions{})
		return err
	}); err != nil {
		return err
	}
	f.done[i] = time.Now()
	return nil
}

// members are the clusters of region r (cluster c is in region c%regions).
func (f *floor) members(r int) []string {
	var out []string
	for c := r; c < len(f.clusters); c += f.regions {
		out = append(out, f.clusters[c])
	}
	return out
}

// targets are template i's clusters as the scheduler picks them: all of
// its region's clusters score alike, so the spread takes the first ones by
// name (pkg/hub/scheduler/core), for every template of the region; the
// replicas divided by equal static weights.
func (f *floor) targets(i int) []workv1alpha1.TargetCluster {
	var out []workv1alpha1.TargetCluster
	for j, name := range f.members(i % f.regions)[:f.spread] {
		r := replicas / f.spread
		if j < replicas%f.spread {
			r++
		}
		out = append(out, workv1alpha1.TargetCluster{Name: name, Replicas: int32(r)})
	}
	return out
}

// decision is the scheduler's record (pkg/hub/scheduler/core/decision.go):
// the selected clusters, then at most MaxUnselectedClusterDecisions others,
// the rest of the region (passed the filters, left out by the spread)
// before the clusters of other regions (filtered by the affinity).
func (f *floor) decision(i int, targets []workv1alpha1.TargetCluster) *workv1alpha1.SchedulingDecision {
	zero := int32(0)
	d := &workv1alpha1.SchedulingDecision{DecidedTime: metav1.Now()}
	selected := map[string]bool{}
	for _, t := range targets {
		selected[t.Name] = true
		d.Clusters = append(d.Clusters, workv1alpha1.ClusterDecision{ClusterName: t.Name, Selected: true, Replicas: t.Replicas,
			Score: &zero, Reason: workv1alpha1.DecisionSelected, Message: "new; static weight 1"})
	}
	region := map[string]bool{}
	var others []workv1alpha1.ClusterDecision
	for _, c := range f.members(i % f.regions) {
		region[c] = true
		if !selected[c] {
			others = append(others, workv1alpha1.ClusterDecision{ClusterName: c, Score: &zero, Reason: workv1alpha1.DecisionNotSelectedBySpread,
				Message: fmt.Sprintf("the spread constraint by cluster takes at most %d clusters; higher-scored ones were picked", f.spread)})
		}
	}
	for _, c := range f.clusters {
		if !region[c] {
			others = append(others, workv1alpha1.ClusterDecision{ClusterName: c, Reason: workv1alpha1.DecisionClusterAffinityMismatch,
				Message: "does not match the placement's cluster affinity"})
		}
	}
	if filtered := len(f.clusters) - len(region); filtered > 0 {
		d.FilteredCounts = []workv1alpha1.FilterCount{{Reason: workv1alpha1.DecisionClusterAffinityMismatch, Count: int32(filtered)}}
	}
	others = others[:min(len(others), f.unselected)]
	d.Clusters = append(d.Clusters, others...)
	d.OmittedClusters = int32(len(f.clusters) - len(d.Clusters))
	return d
}

// binding is the detector's new binding of tmpl, selected by the region's
// policy (as the propagation benchmark's: spread over --spread clusters of
// the region, Divided by static weights).
func binding(tmpl *workv1alpha1.ResourceTemplate, region string, spread int) *workv1alpha1.ResourceBinding {
	return &workv1alpha1.ResourceBinding{
		ObjectMeta: metav1.ObjectMeta{Name: workobjects.BindingName("Deployment", tmpl.Name), Namespace: tmpl.Namespace,
			Labels:          map[string]string{workobjects.LabelPropagationPolicyNamespace: tmpl.Namespace, workobjects.LabelPropagationPolicyName: region},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(tmpl, workv1alpha1.SchemeGroupVersion.WithKind("ResourceTemplate"))}},
		Spec: workv1alpha1.ResourceBindingSpec{
			Resource: workv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: tmpl.Namespace, Name: tmpl.Name, UID: tmpl.UID},
			Replicas: replicas,
			ReplicaRequirements: &workv1alpha1.ReplicaRequirements{ResourceRequest: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}},
			Placement: &policyv1alpha1.Placement{
				ClusterAffinity: &policyv1alpha1.ClusterAffinity{
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{benchLabel: benchValue}},
					FieldSelector: &policyv1alpha1.FieldSelector{MatchExpressions: []policyv1alpha1.FieldSelectorRequirement{
						{Key: policyv1alpha1.RegionField, Operator: corev1.NodeSelectorOpIn, Values: []string{region}}}}},
				SpreadConstraints: []policyv1alpha1.SpreadConstraint{{SpreadByField: policyv1alpha1.SpreadByFieldCluster,
					MinGroups: int32(spread), MaxGroups: int32(spread)}},
				ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDivided,
					ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted}},
			ConflictResolution: policyv1alpha1.ConflictAbort,
			ApplyStrategy:      policyv1alpha1.ApplyStrategyServerSideApply,
		}}
}

// work is the binding controller's Work of rb for target. The hub's also
// carries the finalizer flotilla.io/execution (a few bytes); left out here.
func work(rb *workv1alpha1.ResourceBinding, tmpl *workv1alpha1.ResourceTemplate, target workv1alpha1.TargetCluster, region string) *workv1alpha1.Work {
	raw, _ := json.Marshal(benchutil.Deployment(tmpl.Name, region, tmpl.Namespace, int64(target.Replicas)))
	return &workv1alpha1.Work{
		ObjectMeta: metav1.ObjectMeta{Name: workobjects.WorkName(rb.Namespace, rb.Name), Namespace: clusterlifecycle.Namespace(target.Name),
			Labels: map[string]string{workobjects.LabelBindingUID: string(rb.UID)},
			Annotations: map[string]string{workobjects.AnnotationBindingName: rb.Name, workobjects.AnnotationBindingNamespace: rb.Namespace,
				workobjects.AnnotationCluster: target.Name, workv1alpha1.AnnotationTemplateGeneration: strconv.FormatInt(tmpl.Generation, 10)}},
		Spec: workv1alpha1.WorkSpec{Workload: workv1alpha1.WorkloadTemplate{Manifests: []workv1alpha1.Manifest{{RawExtension: runtime.RawExtension{Raw: raw}}}},
			ApplyStrategy: policyv1alpha1.ApplyStrategyServerSideApply, ConflictResolution: policyv1alpha1.ConflictAbort},
	}
}

// bindingStatusOf is rb's status once its Works (one per target cluster,
// in order) are applied: scheduled, every Work up to date and applied, the
// clusters' statuses as the agents reported them.
func bindingStatusOf(rb *workv1alpha1.ResourceBinding, works []*workv1alpha1.Work, d *workv1alpha1.SchedulingDecision) workv1alpha1.ResourceBindingStatus {
	now := metav1.Now()
	s := workv1alpha1.ResourceBindingStatus{SchedulerObservedGeneration: rb.Generation, LastScheduledTime: &now, SchedulingDecision: d}
	var where []string
	for j, t := range rb.Spec.Clusters {
		where = append(where, fmt.Sprintf("%s(%d)", t.Name, t.Replicas))
		s.AggregatedStatus = append(s.AggregatedStatus, workv1alpha1.AggregatedStatusItem{ClusterName: t.Name, Status: works[j].Status.ManifestStatuses[0].Status,
			Applied: true, Health: workv1alpha1.ResourceHealthy, ObservedGeneration: rb.Generation, FirstReportedTime: &now, EverHealthy: true})
	}
	cond := func(typ, reason, msg string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: reason, Message: msg, ObservedGeneration: rb.Generation, LastTransitionTime: now}
	}
	s.Conditions = []metav1.Condition{
		cond(workv1alpha1.BindingConditionFullyApplied, "FullyApplied", fmt.Sprintf("applied on %d cluster(s)", len(rb.Spec.Clusters))),
		cond(workv1alpha1.BindingConditionWorksUpToDate, "UpToDate", "every Work renders template generation 1"),
		cond(workv1alpha1.BindingConditionScheduled, "BindingScheduled", "scheduled to "+strings.Join(where, ", "))}
	return s
}

// templateStatusOf is the detector's status of tmpl once rb is applied
// (setPropagated in pkg/hub/detector): Propagated, and the binding mirrored.
func templateStatusOf(tmpl *workv1alpha1.ResourceTemplate, rb *workv1alpha1.ResourceBinding) workv1alpha1.ResourceTemplateStatus {
	s := workv1alpha1.ResourceTemplateStatus{ObservedGeneration: tmpl.Generation}
	s.Conditions = append(s.Conditions, metav1.Condition{Type: workobjects.TemplateConditionPropagated, Status: metav1.ConditionTrue, Reason: "PolicyMatched",
		Message:            fmt.Sprintf("propagated by PropagationPolicy %s/%s", rb.Namespace, rb.Labels[workobjects.LabelPropagationPolicyName]),
		ObservedGeneration: tmpl.Generation, LastTransitionTime: metav1.Now()})
	detector.MirrorBinding(nil, &s, rb, tmpl.Generation)
	return s
}

func (f *floor) fail(err error) {
	if f.errs.Add(1) <= 5 {
		fmt.Fprintln(os.Stderr, "error:", err)
	}
}

func (f *floor) progress(ctx context.Context, t0 time.Time) {
	wait.UntilWithContext(ctx, func(context.Context) {
		if d := time.Since(t0); d > time.Second {
			fmt.Fprintf(os.Stderr, "%s: %d writes (%.0f/s), %d errors\n", d.Round(time.Second), f.writes.Load(), float64(f.writes.Load())/d.Seconds(), f.errs.Load())
		}
	}, 10*time.Second)
}

func (f *floor) report(t0 time.Time, wall time.Duration, workers int) {
	r := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	pct := func(l []time.Duration) (p50, p99, worst time.Duration) {
		l = append([]time.Duration(nil), l...)
		sort.Slice(l, func(a, b int) bool { return l[a] < l[b] })
		if len(l) == 0 {
			return
		}
		return l[len(l)/2], l[min(len(l)*99/100, len(l)-1)], l[len(l)-1]
	}
	var critical []time.Duration
	var criticalAll, doneAll time.Duration
	complete := 0
	for i := range f.templates {
		if !f.critical[i].IsZero() {
			critical = append(critical, f.critical[i].Sub(f.start[i]))
			criticalAll = max(criticalAll, f.critical[i].Sub(t0))
		}
		if !f.done[i].IsZero() {
			complete++
			doneAll = max(doneAll, f.done[i].Sub(t0))
		}
	}
	writes := f.writes.Load()
	fmt.Printf("%d templates over %d clusters (%d each), %d workers: %d of them complete, %d errors\n",
		f.templates, len(f.clusters), f.spread, workers, complete, f.errs.Load())
	perTemplate := 3 + 2*f.spread
	if f.statuses {
		perTemplate += 2
	}
	fmt.Printf("%d writes (%d per template) in %s: %.0f writes/s\n", writes, perTemplate, r(wall), float64(writes)/wall.Seconds())
	fmt.Printf("every template's critical path (writes 1–%d) done after %s; all %d writes after %s\n", 3+2*f.spread, r(criticalAll), perTemplate, r(doneAll))
	p50, p99, worst := pct(critical)
	fmt.Printf("critical path per template: p50 %s, p99 %s, max %s\n\n", r(p50), r(p99), r(worst))
	fmt.Printf("| write | count | request body (template 0) | p50 | p99 | max |\n|---|---|---|---|---|---|\n")
	for k := range kinds {
		var l []time.Duration
		for i := range f.templates {
			if !f.done[i].IsZero() { // complete templates only: a failed one has zeros
				l = append(l, f.lat[k][i*f.perTemplate(k):(i+1)*f.perTemplate(k)]...)
			}
		}
		if len(l) == 0 {
			continue // --statuses=false
		}
		p50, p99, worst := pct(l)
		fmt.Printf("| %s | %d | %d B | %s | %s | %s |\n", kindNames[k], len(l), f.size[k], r(p50), r(p99), r(worst))
	}
}

// cleanup deletes each template's Works, binding and template (one by one:
// a DeleteCollection of 10,000 outlives the apiserver's request timeout),
// then the namespaces, and waits for them to go.
func (f *floor) cleanup(kc kubernetes.Interface, namespaces []string, workers int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	fmt.Fprintln(os.Stderr, "cleaning up…")
	start := time.Now()
	indexes := make([]string, f.templates)
	for i := range indexes {
		indexes[i] = strconv.Itoa(i)
	}
	benchutil.Parallel(indexes, workers, func(index string) {
		i, _ := strconv.Atoi(index)
		name := fmt.Sprintf("app-%05d", i)
		rb := workobjects.BindingName("Deployment", name)
		for _, t := range f.targets(i) {
			_ = f.fc.WorkV1alpha1().Works(clusterlifecycle.Namespace(t.Name)).Delete(ctx, workobjects.WorkName(f.ns, rb), metav1.DeleteOptions{})
		}
		_ = f.fc.WorkV1alpha1().ResourceBindings(f.ns).Delete(ctx, rb, metav1.DeleteOptions{})
		_ = f.fc.WorkV1alpha1().ResourceTemplates(f.ns).Delete(ctx, name, metav1.DeleteOptions{})
	})
	// Only the namespaces this tool made (labelled), never, say, a
	// --namespace that existed before.
	ours := metav1.ListOptions{LabelSelector: benchLabel + "=" + benchValue}
	list, err := kc.CoreV1().Namespaces().List(ctx, ours)
	if err != nil {
		return err
	}
	for _, n := range list.Items {
		if slices.Contains(namespaces, n.Name) {
			_ = kc.CoreV1().Namespaces().Delete(ctx, n.Name, metav1.DeleteOptions{})
		}
	}
	err = wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := kc.CoreV1().Namespaces().List(ctx, ours)
		return err == nil && !slices.ContainsFunc(list.Items, func(n corev1.Namespace) bool { return slices.Contains(namespaces, n.Name) }), nil
	})
	fmt.Printf("cleanup took %s\n", time.Since(start).Round(time.Millisecond))
	if err != nil {
		return fmt.Errorf("namespaces not gone: %w", err)
	}
	return nil
}

// ensureNamespace creates ns, waiting for an earlier run's to finish
// terminating first.
func ensureNamespace(ctx context.Context, kc kubernetes.Interface, ns string) error {
	return wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
			Labels: map[string]string{benchLabel: benchValue}}}, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			return err == nil, err
		}
		existing, err := kc.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if existing.DeletionTimestamp == nil {
			return true, nil
		}
		fmt.Fprintf(os.Stderr, "namespace %s is still terminating…\n", ns)
		return false, nil
	})
}

// apiserverProcess reads the apiserver's RSS (bytes) and CPU seconds from
// its /metrics; zeros when it cannot.
func apiserverProcess(ctx context.Context, kc kubernetes.Interface) (rss, cpu float64) {
	body, err := kc.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, 0
	}
	m, _ := benchutil.ParseMetrics(bytes.NewReader(body))
	return m["process_resident_memory_bytes"], m["process_cpu_seconds_total"]
}
