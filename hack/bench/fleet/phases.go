package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/flotilla-io/flotilla/hack/bench/benchutil"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// template is a 1-replica Deployment labelled with its policy's key.
func template(name string, labels map[string]string) *workv1alpha1.ResourceTemplate {
	raw, _ := json.Marshal(benchutil.Deployment(name, "fleet", "", 1))
	var obj map[string]any
	_ = json.Unmarshal(raw, &obj)
	meta := obj["metadata"].(map[string]any)
	l := meta["labels"].(map[string]any)
	for k, v := range labels {
		l[k] = v
	}
	raw, _ = json.Marshal(obj)
	return &workv1alpha1.ResourceTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: workv1alpha1.ResourceTemplateSpec{Manifest: workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: raw}}}}
}

// groupPolicy spreads the templates labelled with group g over its 10
// clusters (Divided, static weights: 1 replica goes to one cluster, ties
// broken per binding); group 0's gives the victim weight 1000.
func (b *bench) groupPolicy(g string) *policyv1alpha1.PropagationPolicy {
	strategy := &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDivided,
		ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted}
	if g == group(0) {
		strategy.WeightPreference = &policyv1alpha1.ClusterPreferences{StaticWeightList: []policyv1alpha1.StaticClusterWeight{
			{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{b.victim}}, Weight: 1000},
			{TargetCluster: policyv1alpha1.ClusterAffinity{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{groupLabel: g}}}, Weight: 1}}}
	}
	return &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: g, Namespace: namespace},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment",
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{groupLabel: g}}}},
			Placement: policyv1alpha1.Placement{
				ClusterAffinity:   &policyv1alpha1.ClusterAffinity{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{groupLabel: g}}},
				ReplicaScheduling: strategy}}}
}

// workloadGroup is the group of workload i: the first victimWorkloads are
// group 0's (on the victim), the others round-robin over groups 1….
func (b *bench) workloadGroup(i int) string {
	if i < b.o.victimWorkloads {
		return group(0)
	}
	groups := b.o.clusters/groupSize - 1
	return group(groupSize * (1 + (i-b.o.victimWorkloads)%groups))
}

func workloadName(i int) string { return fmt.Sprintf("app-%05d", i) }

// fill creates the namespace, the group policies and the workloads, and
// waits until every workload is applied (the victim's on the victim).
func (b *bench) fill(ctx context.Context) error {
	o := b.o
	if _, err := b.kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	for g := 0; g < o.clusters/groupSize; g++ {
		if _, err := b.fc.PolicyV1alpha1().PropagationPolicies(namespace).Create(ctx, b.groupPolicy(group(g*groupSize)), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	b.mu.Lock()
	for i := range o.victimWorkloads {
		b.onVictim[workobjects.BindingName("Deployment", workloadName(i))] = true
	}
	b.mu.Unlock()
	names := make([]string, o.workloads)
	for i := range names {
		names[i] = workloadName(i)
	}
	var failed atomic.Int32
	t0 := time.Now()
	index := map[string]int{}
	for i, n := range names {
		index[n] = i
	}
	benchutil.Parallel(names, o.setupWorkers, func(name string) {
		tmpl := template(name, map[string]string{groupLabel: b.workloadGroup(index[name])})
		if _, err := b.fc.WorkV1alpha1().ResourceTemplates(namespace).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			if failed.Add(1) <= 5 {
				b.log("create %s: %v", name, err)
			}
		}
	})
	if n := failed.Load(); n > 0 {
		return fmt.Errorf("%d templates not created", n)
	}
	b.log("created %d templates in %s; waiting for all to be applied", o.workloads, r1(time.Since(t0)))
	lastLog := time.Now()
	return poll(ctx, o.timeout, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		n, victim := 0, 0
		for _, name := range names {
			m := b.applied[workobjects.BindingName("Deployment", name)]
			if len(m) > 0 {
				n++
			}
			if _, ok := m[b.victim]; ok {
				victim++
			}
		}
		if time.Since(lastLog) > 30*time.Second {
			b.log("%d of %d applied (%d on the victim)", n, o.workloads, victim)
			lastLog = time.Now()
		}
		return n == o.workloads && victim == o.victimWorkloads
	})
}

// placements is (a): one new template after the other, placed by a
// Duplicated policy on the clusters labelled hundredLabel.
func (b *bench) placements(ctx context.Context) error {
	o := b.o
	want := o.clusters / groupSize
	policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "hundred", Namespace: namespace},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment",
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{hundredLabel: "yes"}}}},
			Placement: policyv1alpha1.Placement{
				ClusterAffinity:   &policyv1alpha1.ClusterAffinity{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{hundredLabel: "yes"}}},
				ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDuplicated}}}}
	if _, err := b.fc.PolicyV1alpha1().PropagationPolicies(namespace).Create(ctx, policy, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	time.Sleep(2 * time.Second) // the policy in the hub's caches
	fmt.Printf("\n(a) One new template placed on %d of %d clusters (Duplicated); times from its create:\n\n", want, o.clusters)
	fmt.Printf("| run | →binding | →placed (spec.clusters = %d) | →%d Works exist | →all %d applied | hub writes | load average |\n|---|---|---|---|---|---|---|\n", want, want, want)
	var totals []time.Duration
	for run := range o.placements {
		name := fmt.Sprintf("hundred-%d", run)
		b.mu.Lock()
		b.watch = workobjects.BindingName("Deployment", name)
		b.boundAt, b.placedAt, b.worksAt, b.appliedAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
		b.worksSeen, b.worksApplied = map[string]bool{}, map[string]bool{}
		b.mu.Unlock()
		before, _ := benchutil.Scrape(b.env.HubMetrics)
		t0 := time.Now()
		if _, err := b.fc.WorkV1alpha1().ResourceTemplates(namespace).Create(ctx, template(name, map[string]string{hundredLabel: "yes"}), metav1.CreateOptions{}); err != nil {
			return err
		}
		err := poll(ctx, 5*time.Minute, func() bool {
			b.mu.Lock()
			defer b.mu.Unlock()
			return !b.appliedAt.IsZero()
		})
		time.Sleep(2 * time.Second) // the statuses that follow
		after, _ := benchutil.Scrape(b.env.HubMetrics)
		b.mu.Lock()
		since := func(t time.Time) string {
			if t.IsZero() {
				return "—"
			}
			return r3(t.Sub(t0))
		}
		fmt.Printf("| %d | %s | %s | %s | %s | %.0f | %s |\n", run+1, since(b.boundAt), since(b.placedAt), since(b.worksAt), since(b.appliedAt),
			after["writes"]-before["writes"], benchutil.LoadAverage())
		if !b.appliedAt.IsZero() {
			totals = append(totals, b.appliedAt.Sub(t0))
		}
		b.watch = ""
		b.mu.Unlock()
		if err != nil {
			return fmt.Errorf("placement %d not applied everywhere: %w", run+1, err)
		}
		if run+1 < o.placements {
			b.waitQuiet(ctx, "")
		}
	}
	p50, _, worst := percentiles(totals)
	b.add(fmt.Sprintf("(a) new template → all %d Works applied, median of %d (max)", want, len(totals)), fmt.Sprintf("%s (%s)", r3(p50), r3(worst)), "≤ 5 s")
	return nil
}

// evacuate is (b).
func (b *bench) evacuate(ctx context.Context) error {
	o := b.o
	before, err := scrape(b.env.HubMetrics)
	if err != nil {
		return err
	}
	b.alive[b.victim].Store(false)
	b.mu.Lock()
	b.silentAt = time.Now()
	expiry := b.lastRenew[b.victim].Add(o.grace)
	b.mu.Unlock()
	b.log("(b) %s silent; its Lease expires at %s (in %s)", b.victim, expiry.UTC().Format("15:04:05"), r1(time.Until(expiry)))
	loadStart := benchutil.LoadAverage()
	deadline := time.Now().Add(o.timeout)
	lastLog := time.Now()
	for {
		b.mu.Lock()
		ev, rp := len(b.evicted), len(b.replaced)
		b.mu.Unlock()
		if rp >= o.victimWorkloads && ev >= o.victimWorkloads {
			break
		}
		if time.Now().After(deadline) {
			b.log("timed out: %d evicted, %d replaced", ev, rp)
			break
		}
		if time.Since(lastLog) >= 30*time.Second {
			b.log("%s after expiry: %d evicted, %d running elsewhere (load %s)", r1(time.Since(expiry)), ev, rp, benchutil.LoadAverage())
			lastLog = time.Now()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	end := time.Now()
	time.Sleep(5 * time.Second) // the statuses that follow
	after, err := scrape(b.env.HubMetrics)
	if err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	since := func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return r3(t.Sub(expiry))
	}
	sorted := func(m map[string]time.Time) []time.Duration {
		var l []time.Duration
		for _, t := range m {
			l = append(l, t.Sub(expiry))
		}
		sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
		return l
	}
	ev, rp := sorted(b.evicted), sorted(b.replaced)
	first, last := "—", "—"
	if len(ev) > 0 {
		first, last = r3(ev[0]), r3(ev[len(ev)-1])
	}
	p50, p90, worst := percentiles(rp)
	secs := end.Sub(b.silentAt).Seconds()
	fmt.Printf("\n(b) %d workloads on %s die (of %d clusters); times from its Lease expiry (last renewal + %s). NoExecute %s after Unknown, evictions due %s after it.\n\n",
		o.victimWorkloads, b.victim, o.clusters, o.grace, o.evictionTimeout, o.toleration)
	fmt.Printf("| →Unknown | →NoExecute | →first evicted | →all evicted | evicted | →running elsewhere p50 | p90 | last | moved | hub CPU | load average (start, end) |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	fmt.Printf("| %s | %s | %s | %s | %d | %s | %s | %s | %d | %.0f %% of a core | %s; %s |\n", since(b.unknownAt), since(b.taintAt), first, last, len(ev),
		r3(p50), r3(p90), r3(worst), len(rp), (after["process_cpu_seconds_total"]-before["process_cpu_seconds_total"])/secs*100, loadStart, benchutil.LoadAverage())
	if !b.taintAt.IsZero() && len(rp) > 0 {
		due := b.taintAt.Add(o.toleration).Sub(expiry)
		fmt.Printf("\nEvictions fall due %s after expiry; from then: all evicted %s, running elsewhere p50 %s, p90 %s, last %s.\n",
			r3(due), r3(ev[len(ev)-1]-due), r3(p50-due), r3(p90-due), r3(worst-due))
		b.add(fmt.Sprintf("(b) %d workloads: Lease expiry → all running elsewhere", len(rp)), r3(worst), fmt.Sprintf("≤ %s + 60 s after due", r3(due)))
		b.add("(b) evictions due → all running elsewhere (p50)", fmt.Sprintf("%s (%s)", r3(worst-due), r3(p50-due)), "≤ 60 s")
		b.add("(b) evictions due → all evicted", r3(ev[len(ev)-1]-due), "")
	}
	total := after["writes"] - before["writes"]
	fmt.Printf("\nhub writes during (b): %.0f, %.1f per workload moved (%.1f/s)\n", total, total/float64(max(len(rp), 1)), total/secs)
	b.add("(b) hub writes per workload moved", fmt.Sprintf("%.1f", total/float64(max(len(rp), 1))), "")
	var clients []string
	for k := range after {
		if strings.HasPrefix(k, "writes by ") && after[k] > before[k] {
			clients = append(clients, k)
		}
	}
	sort.Strings(clients)
	for _, k := range clients {
		fmt.Printf("  %s: %.0f (%.2f per workload)\n", strings.TrimPrefix(k, "writes by "), after[k]-before[k], (after[k]-before[k])/float64(max(len(rp), 1)))
	}
	fmt.Printf("flotilla_eviction_evictions_total during (b): %s\n", evictionDelta(before, after))
	return nil
}
