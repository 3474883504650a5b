package faultschedule

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/flotilla-io/flotilla/hub/app"
	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	flotillainformers "github.com/flotilla-io/flotilla/pkg/generated/informers"
	clusterlisters "github.com/flotilla-io/flotilla/pkg/generated/listers/cluster/v1alpha1"
	worklisters "github.com/flotilla-io/flotilla/pkg/generated/listers/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/testenv"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

var everything = labels.Everything()

// dnsTaint is the NoExecute taint the schedule's ClusterTaintPolicy puts on
// a cluster whose in-cluster DNS fails.
const dnsTaint = "example.com/dns-failure"

// Namespace holds the schedule's templates and policies on the hub.
const Namespace = "fleet"

// Timers of the hub under test: short, so that a schedule runs in tens of
// seconds, and in the same proportions as the defaults.
const (
	leaseGrace         = 3 * time.Second
	evictionHistoryTTL = 8 * time.Second
	appToleration      = 2
	// guardThreshold is the hub's --unhealthy-cluster-threshold; the
	// harness expects failover only where the fleet guard allows it.
	guardThreshold = 0.55
)

// HubOptions tunes the hub for schedules.
func HubOptions(kubeconfig string) *app.Options {
	o := app.NewOptions()
	o.Kubeconfig = kubeconfig
	o.KubeAPIQPS, o.KubeAPIBurst = 500, 1000
	o.LeaderElection.LeaderElect = false
	o.MetricsBindAddress, o.HealthProbeBindAddress = "0", "0"
	o.ClusterMonitorPeriod = 500 * time.Millisecond
	o.ClusterMonitorGracePeriod = leaseGrace
	o.ClusterStartupGracePeriod = 4 * time.Second
	o.FailoverEvictionTimeout = time.Second
	o.DefaultNotReadyTolerationSeconds = 1
	o.DefaultUnreachableTolerationSeconds = 1
	o.GracefulEvictionTimeout = 4 * time.Second
	o.EvictionHistoryTTL = evictionHistoryTTL
	o.ResourceEvictionRate = 50
	o.SecondaryEvictionRate = 1
	o.UnhealthyClusterThreshold = guardThreshold
	return o
}

func fastConfig(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = 1000, 2000
	return c
}

// Config sizes a run.
type Config struct {
	// Settle bounds how long the fleet may take to satisfy the liveness
	// invariants after a step.
	Settle time.Duration
	// Log receives progress lines.
	Log func(format string, args ...any)
}

// Result is what a schedule run found.
type Result struct {
	Steps      int      // steps run
	Violations []string // empty when the schedule ran clean
}

// Harness runs one schedule.
type Harness struct {
	cfg        Config
	sched      Schedule
	fc         flotillaclient.Interface
	kube       kubernetes.Interface
	restConfig *rest.Config
	opts       *app.Options

	hubCancel context.CancelFunc
	hubDone   chan error

	clusters clusterlisters.ClusterLister
	bindings worklisters.ResourceBindingLister
	works    worklisters.WorkLister

	members   map[string]*Member // by cluster name, including deleted ones
	workloads []WorkloadSpec
	images    []int

	mu          sync.Mutex
	step        int
	steps       []Step
	touched     map[string]bool // clusters the current step involves
	touchedW    map[int]bool    // workloads the current step changes
	outage      bool
	outageStart time.Time
	deadBefore  map[string]bool // clusters already down when the outage began
	lastBinding map[string]*workv1alpha1.ResourceBinding
	taskSeen    map[string][]time.Time // binding/cluster → when a task from it was seen
	left        map[string]int         // binding/cluster → step it last left the placement
	reentries   map[string]int         // binding/cluster → re-entries in the current step
	deletions   []workDeletion
	recorded    map[types.UID]bool
	violations  []string
}

type workDeletion struct {
	at      time.Time
	step    int
	cluster string
	binding string
	work    string
	judged  bool
}

// Run runs sched against a fresh control plane and returns what it found.
func Run(t testing.TB, sched Schedule, cfg Config) Result {
	env := testenv.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Clients of their own with room to spare: a client-side rate limit
	// shared by the members would delay Lease renewals and make the hub
	// see a healthy member as silent.
	h := &Harness{cfg: cfg, sched: sched, restConfig: fastConfig(env.Config),
		members: map[string]*Member{}, touched: map[string]bool{}, touchedW: map[int]bool{},
		lastBinding: map[string]*workv1alpha1.ResourceBinding{}, taskSeen: map[string][]time.Time{},
		left: map[string]int{}, reentries: map[string]int{}, recorded: map[types.UID]bool{}, step: -1}
	h.fc, h.kube = flotillaclient.NewForConfigOrDie(h.restConfig), kubernetes.NewForConfigOrDie(h.restConfig)
	h.opts = HubOptions(env.KubeconfigFor(t, env.Config))
	// Odd seeds run the hub leader-elected (short Lease, released on
	// stop), so a restart also goes through a leadership change.
	if sched.Seed%2 != 0 {
		h.opts.LeaderElection.LeaderElect = true
		h.opts.LeaderElection.LeaseDuration, h.opts.LeaderElection.RenewDeadline, h.opts.LeaderElection.RetryPeriod = 3*time.Second, 2*time.Second, 300*time.Millisecond
		if _, err := h.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: h.opts.LeaderElection.ResourceNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}

	factory := flotillainformers.NewSharedInformerFactory(h.fc, 0)
	h.clusters = factory.Cluster().V1alpha1().Clusters().Lister()
	h.bindings = factory.Work().V1alpha1().ResourceBindings().Lister()
	h.works = factory.Work().V1alpha1().Works().Lister()
	_, _ = factory.Work().V1alpha1().ResourceBindings().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { h.onBinding(obj.(*workv1alpha1.ResourceBinding)) },
		UpdateFunc: func(_, obj any) { h.onBinding(obj.(*workv1alpha1.ResourceBinding)) },
	})
	_, _ = factory.Cluster().V1alpha1().Clusters().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) { h.onCluster(obj.(*clusterv1alpha1.Cluster)) },
	})
	_, _ = factory.Work().V1alpha1().Works().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) { h.onWork(obj.(*workv1alpha1.Work), false) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if w, ok := obj.(*workv1alpha1.Work); ok {
				h.onWork(w, true)
			}
		},
	})
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	defer cancel() // before Shutdown, which waits for the informers to stop
	factory.WaitForCacheSync(ctx.Done())

	h.startHub(ctx)
	defer h.stopHub()
	defer func() {
		for _, m := range h.members {
			m.Stop()
		}
	}()

	if err := h.setup(ctx); err != nil {
		h.violate("setup: %v", err)
		return h.result()
	}
	h.settle(ctx, -1)
	for i, s := range sched.Steps {
		if len(h.snapshotViolations()) > 0 {
			break
		}
		h.beginStep(i, s, i > 0 && sched.Steps[i-1].QuickMillis > 0)
		h.cfg.Log("seed %d step %d/%d: %s", sched.Seed, i+1, len(sched.Steps), s)
		if err := h.apply(ctx, i, s); err != nil {
			h.violate("step %d (%s): applying: %v", i, s, err)
			break
		}
		if s.QuickMillis > 0 && i+1 < len(sched.Steps) {
			time.Sleep(time.Duration(s.QuickMillis) * time.Millisecond)
			continue
		}
		h.settle(ctx, i)
	}
	return h.result()
}

func (h *Harness) result() Result {
	h.mu.Lock()
	defer h.mu.Unlock()
	return Result{Steps: len(h.steps), Violations: slices.Clone(h.violations)}
}

func (h *Harness) snapshotViolations() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.violations)
}

func (h *Harness) violate(format string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.violateLocked(format, args...)
}

func (h *Harness) violateLocked(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if len(h.violations) < 20 {
		h.violations = append(h.violations, fmt.Sprintf("[step %d] %s", h.step, msg))
	}
}

func (h *Harness) startHub(ctx context.Context) {
	hubCtx, cancel := context.WithCancel(ctx)
	h.hubCancel, h.hubDone = cancel, make(chan error, 1)
	go func() { h.hubDone <- app.Run(hubCtx, h.opts) }()
}

func (h *Harness) stopHub() {
	h.hubCancel()
	<-h.hubDone
}

// setup registers the fleet, starts its members and creates the workloads.
func (h *Harness) setup(ctx context.Context) error {
	if _, err := h.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	// A failing in-cluster DNS evicts, through a ClusterTaintPolicy (the
	// hub has no built-in reaction to it).
	dns := &clusterv1alpha1.ClusterTaintPolicy{ObjectMeta: metav1.ObjectMeta{Name: "dns-failure"},
		Spec: clusterv1alpha1.ClusterTaintPolicySpec{
			AddOnConditions: []clusterv1alpha1.MatchCondition{{ConditionType: clusterv1alpha1.ClusterConditionServiceDomainNameResolutionReady,
				Operator: clusterv1alpha1.MatchConditionOpIn, StatusValues: []metav1.ConditionStatus{metav1.ConditionFalse}}},
			RemoveOnConditions: []clusterv1alpha1.MatchCondition{{ConditionType: clusterv1alpha1.ClusterConditionServiceDomainNameResolutionReady,
				Operator: clusterv1alpha1.MatchConditionOpIn, StatusValues: []metav1.ConditionStatus{metav1.ConditionTrue}}},
			Taints: []clusterv1alpha1.Taint{{Key: dnsTaint, Effect: corev1.TaintEffectNoExecute}},
		}}
	if _, err := h.fc.ClusterV1alpha1().ClusterTaintPolicies().Create(ctx, dns, metav1.CreateOptions{}); err != nil {
		return err
	}
	for _, c := range h.sched.Clusters {
		if err := h.addCluster(ctx, c.Name, c.Region, c.Pods, ModeAlive); err != nil {
			return err
		}
	}
	h.workloads = slices.Clone(h.sched.Workloads)
	h.images = make([]int, len(h.workloads))
	for i, w := range h.workloads {
		h.images[i] = 1
		if _, err := h.fc.PolicyV1alpha1().PropagationPolicies(Namespace).Create(ctx, policyFor(i, w), metav1.CreateOptions{}); err != nil {
			return err
		}
		tmpl := &workv1alpha1.ResourceTemplate{ObjectMeta: metav1.ObjectMeta{Name: workloadName(i), Namespace: Namespace},
			Spec: workv1alpha1.ResourceTemplateSpec{Manifest: workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: manifest(i, w.Replicas, 1)}}}}
		if _, err := h.fc.WorkV1alpha1().ResourceTemplates(Namespace).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

func (h *Harness) addCluster(ctx context.Context, name, region string, pods int64, mode Mode) error {
	c := &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"fleet": "sim"}},
		Spec: clusterv1alpha1.ClusterSpec{Region: region}}
	if _, err := h.fc.ClusterV1alpha1().Clusters().Create(ctx, c, metav1.CreateOptions{}); err != nil {
		return err
	}
	m := newMember(name, region, pods, flotillaclient.NewForConfigOrDie(h.restConfig), kubernetes.NewForConfigOrDie(h.restConfig), h.works, h.sched.Seed+int64(len(h.members)))
	m.mode = mode
	h.mu.Lock() // the watch handlers read members
	h.members[name] = m
	h.mu.Unlock()
	m.Start(ctx)
	return nil
}

func workloadName(i int) string { return fmt.Sprintf("w%d", i) }

func bindingName(i int) string { return workobjects.BindingName("Deployment", workloadName(i)) }

func imageFor(i, version int) string {
	return fmt.Sprintf("registry.example.com/app%d:v%d", i, version)
}

func manifest(i, replicas, version int) []byte {
	name := workloadName(i)
	return fmt.Appendf(nil, `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":%q,"labels":{"app":%q}},
"spec":{"replicas":%d,"selector":{"matchLabels":{"app":%q}},"template":{"metadata":{"labels":{"app":%q}},
"spec":{"containers":[{"name":"app","image":%q,"resources":{"requests":{"cpu":"100m"}}}]}}}}`,
		name, name, replicas, name, name, imageFor(i, version))
}

// policyFor renders a workload's PropagationPolicy.
func policyFor(i int, w WorkloadSpec) *policyv1alpha1.PropagationPolicy {
	name := workloadName(i)
	p := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace},
		Spec: policyv1alpha1.PropagationSpec{ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: name}}}}
	pl := &p.Spec.Placement
	duplicated := &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDuplicated}
	static := func() *policyv1alpha1.ReplicaSchedulingStrategy {
		var weights []policyv1alpha1.StaticClusterWeight
		for j, c := range w.Names {
			weights = append(weights, policyv1alpha1.StaticClusterWeight{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{c}}, Weight: int64(1 + j%3)})
		}
		return &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDivided,
			ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted,
			WeightPreference:          &policyv1alpha1.ClusterPreferences{StaticWeightList: weights}}
	}
	switch w.Variant {
	case VariantDuplicatedNames, VariantPinned:
		pl.ClusterAffinity = &policyv1alpha1.ClusterAffinity{ClusterNames: w.Names}
		pl.ReplicaScheduling = duplicated
	case VariantStaticWeights:
		pl.ClusterAffinity = &policyv1alpha1.ClusterAffinity{ClusterNames: w.Names}
		pl.ReplicaScheduling = static()
	case VariantDynamicWeights:
		pl.ReplicaScheduling = &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDivided,
			ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted,
			WeightPreference:          &policyv1alpha1.ClusterPreferences{DynamicWeight: policyv1alpha1.DynamicWeightByAvailableReplicas}}
	case VariantAggregated:
		pl.ReplicaScheduling = &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDivided,
			ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceAggregated}
	case VariantAffinities:
		pl.ClusterAffinities = []policyv1alpha1.ClusterAffinityTerm{
			{AffinityName: "primary", ClusterAffinity: policyv1alpha1.ClusterAffinity{FieldSelector: &policyv1alpha1.FieldSelector{
				MatchExpressions: []policyv1alpha1.FieldSelectorRequirement{{Key: policyv1alpha1.RegionField, Operator: corev1.NodeSelectorOpIn, Values: []string{w.Region}}}}}},
			{AffinityName: "backup", ClusterAffinity: policyv1alpha1.ClusterAffinity{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"fleet": "sim"}}}},
		}
		pl.ReplicaScheduling = &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDivided,
			ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted}
	case VariantSpreadRegions:
		// A region constraint needs a cluster one beside it (Karmada's
		// validation, refused at apply).
		pl.SpreadConstraints = []policyv1alpha1.SpreadConstraint{{SpreadByField: policyv1alpha1.SpreadByFieldRegion, MaxGroups: 2, MinGroups: 1},
			{SpreadByField: policyv1alpha1.SpreadByFieldCluster, MaxGroups: 4, MinGroups: 1}}
		pl.ReplicaScheduling = duplicated
	case VariantAppFailoverGraceful:
		pl.ClusterAffinity = &policyv1alpha1.ClusterAffinity{ClusterNames: w.Names}
		pl.ReplicaScheduling = static()
		p.Spec.Failover = &policyv1alpha1.FailoverBehavior{Application: &policyv1alpha1.ApplicationFailoverBehavior{
			DecisionConditions: policyv1alpha1.DecisionConditions{TolerationSeconds: ptr.To[int32](appToleration)},
			PurgeMode:          policyv1alpha1.PurgeModeGracefully, GracePeriodSeconds: ptr.To[int32](5)}}
	case VariantAppFailoverDirect:
		pl.ClusterAffinity = &policyv1alpha1.ClusterAffinity{ClusterNames: w.Names}
		pl.ReplicaScheduling = duplicated
		p.Spec.Failover = &policyv1alpha1.FailoverBehavior{Application: &policyv1alpha1.ApplicationFailoverBehavior{
			DecisionConditions: policyv1alpha1.DecisionConditions{TolerationSeconds: ptr.To[int32](appToleration)},
			PurgeMode:          policyv1alpha1.PurgeModeDirectly}}
	}
	return p
}

// beginStep records what the step involves, for the safety checks that run
// from watch events.
// carry keeps what the previous, unsettled step involved: its effects are
// still under way.
func (h *Harness) beginStep(i int, s Step, carry bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.step = i
	h.steps = append(h.steps, s)
	if !carry {
		h.touched = map[string]bool{}
		h.touchedW = map[int]bool{}
		h.reentries = map[string]int{}
	}
	for _, c := range s.Clusters {
		h.touched[c] = true
	}
	if s.Workload >= 0 {
		h.touchedW[s.Workload] = true
	}
	switch s.Kind {
	case StepOutage:
		h.outage, h.outageStart = true, time.Now()
		h.deadBefore = map[string]bool{}
		for name, m := range h.members {
			if st := m.Snapshot(); st.Mode != ModeAlive {
				h.deadBefore[name] = true
			}
		}
	case StepRevive:
		h.outage = false
	case StepHubRestart, StepWaitHistory:
		// Nothing is involved: any change the hub makes is its own.
	}
}

func (h *Harness) member(name string) *Member { return h.members[name] }

// apply performs one step.
func (h *Harness) apply(ctx context.Context, i int, s Step) error {
	setMode := func(mode Mode) {
		for _, c := range s.Clusters {
			if m := h.member(c); m != nil {
				m.Set(func(m *Member) { m.mode = mode })
			}
		}
	}
	switch s.Kind {
	case StepKill, StepOutage:
		setMode(ModeSilent)
	case StepNotReady:
		setMode(ModeNotReady)
	case StepRevive:
		setMode(ModeAlive)
	case StepDNSFault, StepDNSHeal:
		for _, c := range s.Clusters {
			h.member(c).Set(func(m *Member) { m.dnsFault = s.Kind == StepDNSFault })
		}
	case StepAppFault, StepAppHeal:
		for _, c := range s.Clusters {
			h.member(c).Set(func(m *Member) { m.appFault = s.Kind == StepAppFault })
		}
	case StepCapacity:
		h.member(s.Clusters[0]).Set(func(m *Member) { m.pods = int64(s.Value) })
	case StepAddCluster:
		mode := ModeAlive
		if s.Value == 1 {
			mode = ModeSilent
		}
		return h.addCluster(ctx, s.Clusters[0], s.Region, 200, mode)
	case StepDelCluster:
		m := h.member(s.Clusters[0])
		m.Set(func(m *Member) { m.gone = true })
		m.Stop()
		return h.fc.ClusterV1alpha1().Clusters().Delete(ctx, s.Clusters[0], metav1.DeleteOptions{})
	case StepHubRestart:
		h.stopHub()
		h.startHub(ctx)
	case StepImage:
		h.images[s.Workload] = s.Value
		return h.updateTemplate(ctx, s.Workload)
	case StepReplicas:
		h.workloads[s.Workload].Replicas = s.Value
		return h.updateTemplate(ctx, s.Workload)
	case StepPolicy:
		w := PolicyWorkload(h.sched.Seed, i, Variant(s.Value), h.liveClusterNames(), h.workloads[s.Workload].Replicas)
		h.workloads[s.Workload] = w
		return retry(ctx, func() error {
			cur, err := h.fc.PolicyV1alpha1().PropagationPolicies(Namespace).Get(ctx, workloadName(s.Workload), metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur.Spec = policyFor(s.Workload, w).Spec
			_, err = h.fc.PolicyV1alpha1().PropagationPolicies(Namespace).Update(ctx, cur, metav1.UpdateOptions{})
			return err
		})
	case StepWaitHistory:
		select {
		case <-ctx.Done():
		case <-time.After(evictionHistoryTTL + time.Second):
		}
	}
	return nil
}

func (h *Harness) liveClusterNames() []string {
	var out []string
	for name, m := range h.members {
		if !m.Snapshot().Gone {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

func (h *Harness) updateTemplate(ctx context.Context, i int) error {
	return retry(ctx, func() error {
		cur, err := h.fc.WorkV1alpha1().ResourceTemplates(Namespace).Get(ctx, workloadName(i), metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Spec.Manifest.Raw = manifest(i, h.workloads[i].Replicas, h.images[i])
		_, err = h.fc.WorkV1alpha1().ResourceTemplates(Namespace).Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

func retry(ctx context.Context, f func() error) error {
	var err error
	for range 50 {
		if err = f(); err == nil || !apierrors.IsConflict(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return err
}

// healthy says whether a member runs and reports as it should.
func healthy(st State) bool { return alive(st) && !st.AppFault && !st.DNSFault }

// alive says whether a member reports Ready (its applications may be
// unhealthy: without application failover, or when they are unhealthy
// everywhere, the hub rightly leaves them where they are).
func alive(st State) bool { return !st.Gone && st.Mode == ModeAlive }

// usable says whether workloads may run on a member: Ready, and not
// tainted NoExecute for its DNS.
func usable(st State) bool { return alive(st) && !st.DNSFault }

func key(binding, cluster string) string { return binding + "/" + cluster }

// onBinding checks the safety invariants on every binding change: a
// healthy, uninvolved cluster never loses replicas (3), a fleet-wide outage
// starts no eviction (4), no placement flaps (6); and records when eviction
// tasks were seen, for judging Work deletions.
func (h *Harness) onBinding(rb *workv1alpha1.ResourceBinding) {
	h.mu.Lock()
	defer h.mu.Unlock()
	name := rb.Name
	prev := h.lastBinding[name]
	h.lastBinding[name] = rb.DeepCopy()
	now := time.Now()
	for _, task := range rb.Spec.GracefulEvictionTasks {
		k := key(name, task.FromCluster)
		h.taskSeen[k] = append(h.taskSeen[k], now)
		if h.outage && now.After(h.outageNoticed()) && !h.deadBefore[task.FromCluster] && (prev == nil || !hasTask(prev, task.FromCluster)) {
			h.violateLocked("invariant 4 (fleet-wide outage evicts nothing): binding %s got an eviction task from %s (reason %s, producer %s) during the outage; binding: %s",
				name, task.FromCluster, task.Reason, task.Producer, describeBinding(rb))
		}
	}
	if prev == nil || h.step < 0 {
		return
	}
	w := workloadIndex(name)
	before, after := replicasByCluster(prev), replicasByCluster(rb)
	for c, n := range before {
		m := h.members[c]
		if m == nil {
			continue
		}
		st := m.Snapshot()
		if got, ok := after[c]; (!ok || got < n) && healthy(st) && !h.touched[c] && !h.touchedW[w] {
			h.violateLocked("invariant 3 (a healthy cluster's replicas never drop in a failover): binding %s: %s went from %d to %d replicas (placement %v → %v); tasks now %s",
				name, c, n, got, before, after, tasksOf(rb))
		}
		if _, ok := after[c]; !ok {
			h.left[key(name, c)] = h.step
		}
	}
	for c := range after {
		if _, ok := before[c]; ok {
			continue
		}
		if m := h.members[c]; m != nil && !m.Snapshot().Reported {
			h.violateLocked("unknown is not infinite (issue 17 item 4): binding %s placed %d replicas on %s, whose agent never reported; placement %v",
				name, after[c], c, after)
		}
		k := key(name, c)
		if _, wasOut := h.left[k]; !wasOut {
			continue
		}
		h.reentries[k]++
		if h.reentries[k] >= 2 && !h.touched[c] && !h.touchedW[w] {
			h.violateLocked("invariant 6 (no placement flaps): binding %s: %s left and re-entered the placement %d times in one step that does not involve it; placement now %v",
				name, c, h.reentries[k], after)
		}
	}
}

// outageNoticed is when the hub can know of the fleet-wide outage: the
// members' last reports stand until their Leases expire, and a decision
// taken on them before then (e.g. an application failover for an
// Unhealthy report) is not caused by the outage.
func (h *Harness) outageNoticed() time.Time {
	return h.outageStart.Add(leaseGrace + time.Second)
}

// onCluster notices when the hub sees a member that renews and reports as
// not Ready: on this shared, slow machine a starved process can miss the
// short Lease grace. What the hub then does to that cluster is a reaction
// to a fault, so the step counts as involving it (and the log says so).
func (h *Harness) onCluster(c *clusterv1alpha1.Cluster) {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.members[c.Name]
	if m == nil {
		return
	}
	st := m.Snapshot()
	if !alive(st) || !st.Reported || meta.IsStatusConditionTrue(c.Status.Conditions, clusterv1alpha1.ClusterConditionReady) {
		return
	}
	if !h.touched[c.Name] {
		h.touched[c.Name] = true
		h.cfg.Log("note: the hub sees alive member %s as not Ready (%s); step %d treats it as involved", c.Name,
			condStatus(meta.FindStatusCondition(c.Status.Conditions, clusterv1alpha1.ClusterConditionReady)), h.step)
	}
}

// onWork records Work deletions; they are judged once the step settles
// (the binding's task may be observed after the Work's deletion).
func (h *Harness) onWork(w *workv1alpha1.Work, deleted bool) {
	if w.DeletionTimestamp == nil && !deleted {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.recorded[w.UID] {
		return
	}
	h.recorded[w.UID] = true
	cluster := w.Annotations[workobjects.AnnotationCluster]
	if h.outage && !h.deadBefore[cluster] && w.DeletionTimestamp != nil && w.DeletionTimestamp.After(h.outageNoticed()) {
		h.violateLocked("invariant 4 (a fleet-wide outage deletes no Work): Work %s/%s for %s was deleted during the outage; binding: %s",
			w.Namespace, w.Name, cluster, describeBinding(h.lastBinding[w.Annotations[workobjects.AnnotationBindingName]]))
	}
	h.deletions = append(h.deletions, workDeletion{at: time.Now(), step: h.step, cluster: w.Annotations[workobjects.AnnotationCluster],
		binding: w.Annotations[workobjects.AnnotationBindingName], work: w.Namespace + "/" + w.Name})
}

// judgeDeletions checks invariants 3 and 4 for Works: none is deleted
// unless its binding had a graceful eviction task for that cluster or the
// cluster was deleted; none during a fleet-wide outage unless its task
// predates the outage.
func (h *Harness) judgeDeletions() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range h.deletions {
		d := &h.deletions[i]
		if d.judged {
			continue
		}
		d.judged = true
		if m := h.members[d.cluster]; m == nil || m.Snapshot().Gone {
			continue
		}
		ok := false
		for _, t := range h.taskSeen[key(d.binding, d.cluster)] {
			if t.After(d.at.Add(-60*time.Second)) && t.Before(d.at.Add(10*time.Second)) {
				ok = true
			}
		}
		if !ok {
			step := "setup"
			if d.step >= 0 && d.step < len(h.steps) {
				step = h.steps[d.step].String()
			}
			h.violations = append(h.violations, fmt.Sprintf("[step %d] invariant 3 (no Work deleted without a graceful eviction task): Work %s of binding %s for cluster %s was deleted during step %q with no task from %s seen; binding: %s",
				d.step, d.work, d.binding, d.cluster, step, d.cluster, describeBinding(h.lastBinding[d.binding])))
		}
	}
}

func hasTask(rb *workv1alpha1.ResourceBinding, cluster string) bool {
	return slices.ContainsFunc(rb.Spec.GracefulEvictionTasks, func(t workv1alpha1.GracefulEvictionTask) bool { return t.FromCluster == cluster })
}

func replicasByCluster(rb *workv1alpha1.ResourceBinding) map[string]int32 {
	out := map[string]int32{}
	for _, c := range rb.Spec.Clusters {
		out[c.Name] = c.Replicas
	}
	return out
}

func tasksOf(rb *workv1alpha1.ResourceBinding) string {
	var parts []string
	for _, t := range rb.Spec.GracefulEvictionTasks {
		parts = append(parts, fmt.Sprintf("%s(%s,%s,%s)", t.FromCluster, t.Reason, t.Producer, t.PurgeMode))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func describeBinding(rb *workv1alpha1.ResourceBinding) string {
	if rb == nil {
		return "<none seen>"
	}
	var conds []string
	for _, c := range rb.Status.Conditions {
		conds = append(conds, fmt.Sprintf("%s=%s(%s: %s)", c.Type, c.Status, c.Reason, c.Message))
	}
	var hist []string
	for _, e := range rb.Spec.EvictionHistory {
		hist = append(hist, e.ClusterName+":"+e.Reason)
	}
	return fmt.Sprintf("{gen %d sched-gen %d affinity %q clusters %v tasks %s history %v conditions %v}", rb.Generation, rb.Status.SchedulerObservedGeneration,
		rb.Status.SchedulerObservedAffinityName, replicasByCluster(rb), tasksOf(rb), hist, conds)
}

func workloadIndex(binding string) int {
	var i int
	if _, err := fmt.Sscanf(binding, "w%d-", &i); err != nil {
		return -1
	}
	return i
}

// settle waits, within the bound, for the liveness invariants; what still
// fails at the bound is a violation.
func (h *Harness) settle(ctx context.Context, step int) {
	deadline := time.Now().Add(h.cfg.Settle)
	var problems []string
	for {
		problems = h.liveness()
		if len(problems) == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Let in-flight watch events arrive before judging deletions.
	time.Sleep(300 * time.Millisecond)
	h.judgeDeletions()
	for _, p := range problems {
		h.violate("not settled within %s: %s", h.cfg.Settle, p)
	}
}

// liveness lists what does not (yet) hold of invariants 1, 2 and 5, and of
// the hub's view of the fleet.
func (h *Harness) liveness() []string {
	var problems []string
	states := map[string]State{}
	for name, m := range h.members {
		states[name] = m.Snapshot()
	}
	// The hub sees the fleet as it is (so that the next step means what
	// it says).
	calm := h.calmRegions(states)
	for name, st := range states {
		if st.Gone {
			continue
		}
		c, err := h.clusters.Get(name)
		if err != nil {
			problems = append(problems, fmt.Sprintf("cluster %s: %v", name, err))
			continue
		}
		ready := meta.FindStatusCondition(c.Status.Conditions, clusterv1alpha1.ClusterConditionReady)
		isTrue := ready != nil && ready.Status == metav1.ConditionTrue
		switch {
		case st.Mode == ModeAlive && !isTrue:
			problems = append(problems, fmt.Sprintf("cluster %s is alive but the hub has Ready=%v", name, condStatus(ready)))
		case st.Mode != ModeAlive && isTrue:
			problems = append(problems, fmt.Sprintf("cluster %s is %s but the hub has Ready=True", name, st.Mode))
		case st.Mode == ModeAlive:
			hasDNSTaint := slices.ContainsFunc(c.Spec.Taints, func(t corev1.Taint) bool { return t.Key == dnsTaint })
			// The DNS taint is NoExecute: the fleet guard rightly holds it
			// back while the fleet or the cluster's region is disrupted.
			held := !calm["*"] || !calm[regionOf(h.members[name])]
			if hasDNSTaint != st.DNSFault && !(st.DNSFault && held) {
				problems = append(problems, fmt.Sprintf("cluster %s: DNS failing %v but the %s taint present %v", name, st.DNSFault, dnsTaint, hasDNSTaint))
			}
			for _, t := range c.Spec.Taints {
				if t.Key == clusterv1alpha1.TaintClusterNotReady || t.Key == clusterv1alpha1.TaintClusterUnreachable {
					problems = append(problems, fmt.Sprintf("cluster %s is Ready but keeps taint %s:%s", name, t.Key, t.Effect))
				}
			}
		}
	}
	for i, w := range h.workloads {
		name := bindingName(i)
		rb, err := h.bindings.ResourceBindings(Namespace).Get(name)
		if err != nil {
			problems = append(problems, fmt.Sprintf("binding %s: %v", name, err))
			continue
		}
		if rb.Status.SchedulerObservedGeneration != rb.Generation {
			problems = append(problems, fmt.Sprintf("binding %s not scheduled for generation %d: %s", name, rb.Generation, describeBinding(rb)))
			continue
		}
		eligible := h.eligible(w, states)
		// Invariant 2: no eviction task with an empty placement once an
		// eligible cluster is Ready.
		if len(eligible) > 0 && len(rb.Spec.Clusters) == 0 && len(rb.Spec.GracefulEvictionTasks) > 0 {
			problems = append(problems, fmt.Sprintf("invariant 2 (no task with an empty placement while an eligible cluster is Ready): binding %s (eligible %v): %s",
				name, eligible, describeBinding(rb)))
		}
		// Invariant 1: it runs (a healthy copy on a healthy cluster).
		guarded := false
		for c := range replicasByCluster(rb) {
			if st, ok := states[c]; ok && !st.Gone && !calm[regionOf(h.members[c])] {
				guarded = true
			}
		}
		if len(eligible) > 0 && !guarded && !calm["*"] {
			guarded = true
		}
		if len(eligible) > 0 && !guarded {
			runs := false
			for _, st := range states {
				if cp, ok := st.Running[workobjects.WorkName(Namespace, name)]; ok && usable(st) && cp.Replicas > 0 {
					runs = true
				}
			}
			if !runs {
				problems = append(problems, fmt.Sprintf("invariant 1 (a workload with an eligible Ready cluster runs): %s has no copy on a Ready member (eligible %v): %s",
					name, eligible, describeBinding(rb)))
			}
		}
		// Invariant 5: the template reaches every placed Ready cluster.
		want := imageFor(i, h.images[i])
		for _, tc := range rb.Spec.Clusters {
			st, ok := states[tc.Name]
			if !ok || st.Gone || st.Mode != ModeAlive {
				continue
			}
			work, err := h.works.Works("flotilla-es-" + tc.Name).Get(workobjects.WorkName(Namespace, name))
			if err != nil {
				problems = append(problems, fmt.Sprintf("invariant 5: binding %s placed on Ready %s has no Work: %v", name, tc.Name, err))
				continue
			}
			obj := &unstructured.Unstructured{}
			_ = obj.UnmarshalJSON(work.Spec.Workload.Manifests[0].Raw)
			wantReplicas := int64(w.Replicas)
			// A placement that cannot be met (e.g. pinned to a dead
			// cluster) keeps the previous result, Divided shares
			// included: the Works follow the binding, not the variant.
			if divided(w.Variant) || !scheduledNow(rb) {
				wantReplicas = int64(tc.Replicas)
			}
			if got := imageOf(obj); got != want || replicasOf(obj) != wantReplicas || work.DeletionTimestamp != nil {
				problems = append(problems, fmt.Sprintf("invariant 5 (a template change reaches every placed Ready cluster): Work of %s on %s has image %s replicas %d deleting %v; want %s, %d",
					name, tc.Name, got, replicasOf(obj), work.DeletionTimestamp != nil, want, wantReplicas))
				continue
			}
			if cp := st.Running[work.Name]; cp.Image != want {
				problems = append(problems, fmt.Sprintf("invariant 5: %s on %s runs %q, want %s (not applied yet)", name, tc.Name, cp.Image, want))
			}
		}
	}
	sort.Strings(problems)
	return problems
}

func condStatus(c *metav1.Condition) string {
	if c == nil {
		return "<none>"
	}
	return string(c.Status) + "/" + c.Reason
}

func divided(v Variant) bool {
	switch v {
	case VariantStaticWeights, VariantDynamicWeights, VariantAggregated, VariantAffinities, VariantAppFailoverGraceful:
		return true
	}
	return false
}

func regionOf(m *Member) string {
	if m == nil {
		return ""
	}
	return m.Region
}

// calmRegions says, per region (and "*" for the whole fleet), whether the
// share of clusters down is below the fleet guard's threshold, i.e.
// whether the hub is expected to fail over from there.
func (h *Harness) calmRegions(states map[string]State) map[string]bool {
	total, down := map[string]int{}, map[string]int{}
	for name, st := range states {
		if st.Gone {
			continue
		}
		r := regionOf(h.members[name])
		for _, k := range []string{r, "*"} {
			total[k]++
			if st.Mode != ModeAlive {
				down[k]++
			}
		}
	}
	calm := map[string]bool{}
	for k, n := range total {
		calm[k] = float64(down[k])/float64(n) < guardThreshold
	}
	return calm
}

// eligible lists the Ready clusters the workload's policy allows (and that
// can hold it, for capacity-based division).
func (h *Harness) eligible(w WorkloadSpec, states map[string]State) []string {
	var out []string
	for name, st := range states {
		if !usable(st) {
			continue
		}
		switch w.Variant {
		case VariantDuplicatedNames, VariantPinned, VariantStaticWeights, VariantAppFailoverGraceful, VariantAppFailoverDirect:
			if !slices.Contains(w.Names, name) {
				continue
			}
		case VariantDynamicWeights, VariantAggregated:
			if st.Pods < int64(w.Replicas) {
				continue
			}
		}
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// scheduledNow: the scheduler placed the binding's current generation.
func scheduledNow(rb *workv1alpha1.ResourceBinding) bool {
	c := meta.FindStatusCondition(rb.Status.Conditions, workv1alpha1.BindingConditionScheduled)
	return c != nil && c.Status == metav1.ConditionTrue && rb.Status.SchedulerObservedGeneration == rb.Generation
}
