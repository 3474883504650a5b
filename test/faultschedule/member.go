package faultschedule

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	worklisters "github.com/flotilla-io/flotilla/pkg/generated/listers/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/hub/clusterlifecycle"
)

// Mode is how a simulated member behaves.
type Mode int

// Member modes.
const (
	// ModeAlive renews its Lease, reports Ready and applies Works.
	ModeAlive Mode = iota
	// ModeSilent does nothing on the hub (a cut-off agent); what runs on
	// the member keeps running and a deleted Work stays terminating.
	ModeSilent
	// ModeNotReady renews its Lease and reports Ready=False; its
	// apiserver is down, so nothing is applied or removed.
	ModeNotReady
)

func (m Mode) String() string { return [...]string{"alive", "silent", "not-ready"}[m] }

// Copy is what runs on a member for one Work.
type Copy struct {
	Replicas int64
	Image    string
}

// Member is a simulated member agent: one goroutine with a hub client.
type Member struct {
	Name   string
	Region string

	fc    flotillaclient.Interface
	kube  kubernetes.Interface
	works worklisters.WorkLister

	mu       sync.Mutex
	mode     Mode
	appFault bool
	dnsFault bool
	pods     int64
	gone     bool            // the Cluster was deleted; the agent stopped
	reported bool            // the agent has written the Cluster's status at least once
	running  map[string]Copy // Work name → what runs
	pending  map[string]time.Time
	rng      *rand.Rand
	stop     context.CancelFunc
	done     chan struct{}
	lastKey  string // last status written, to write only on change
	lastPush time.Time
	// lastRenew is when the Lease was last renewed (the loop's goroutine
	// only).
	lastRenew time.Time
}

func newMember(name, region string, pods int64, fc flotillaclient.Interface, kube kubernetes.Interface, works worklisters.WorkLister, seed int64) *Member {
	return &Member{Name: name, Region: region, fc: fc, kube: kube, works: works, pods: pods,
		running: map[string]Copy{}, pending: map[string]time.Time{}, rng: rand.New(rand.NewSource(seed))}
}

// State is a snapshot of a member.
type State struct {
	Mode     Mode
	AppFault bool
	DNSFault bool
	Pods     int64
	Gone     bool
	Reported bool
	Running  map[string]Copy
}

// Snapshot returns the member's state.
func (m *Member) Snapshot() State {
	m.mu.Lock()
	defer m.mu.Unlock()
	run := make(map[string]Copy, len(m.running))
	for k, v := range m.running {
		run[k] = v
	}
	return State{Mode: m.mode, AppFault: m.appFault, DNSFault: m.dnsFault, Pods: m.pods, Gone: m.gone, Reported: m.reported, Running: run}
}

// Set changes the member's behaviour.
func (m *Member) Set(f func(m *Member)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f(m)
	m.lastKey = "" // report at once
}

// Start runs the agent loop until Stop.
func (m *Member) Start(ctx context.Context) {
	ctx, m.stop = context.WithCancel(ctx)
	m.done = make(chan struct{})
	go func() {
		defer close(m.done)
		tick := time.NewTicker(150 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			m.once(ctx)
		}
	}()
}

// Stop ends the agent loop.
func (m *Member) Stop() {
	if m.stop != nil {
		m.stop()
		<-m.done
	}
}

func (m *Member) once(ctx context.Context) {
	m.mu.Lock()
	mode, gone := m.mode, m.gone
	m.mu.Unlock()
	if gone || mode == ModeSilent {
		return
	}
	if time.Since(m.lastRenew) > 400*time.Millisecond {
		m.renewLease(ctx)
	}
	m.reportStatus(ctx, mode)
	if mode == ModeAlive {
		m.syncWorks(ctx)
	}
}

// renewLease advances the Lease the hub made in the cluster's namespace.
func (m *Member) renewLease(ctx context.Context) {
	leases := m.kube.CoordinationV1().Leases(clusterlifecycle.Namespace(m.Name))
	l, err := leases.Get(ctx, m.Name, metav1.GetOptions{})
	if err != nil {
		return // not made yet (or being repaired): the hub makes it
	}
	now := metav1.NewMicroTime(time.Now())
	l.Spec.RenewTime = &now
	l.Spec.HolderIdentity = ptr.To("sim-" + m.Name)
	l.Spec.LeaseDurationSeconds = ptr.To(int32(2))
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err == nil {
		m.lastRenew = time.Now()
	}
}

// reportStatus writes Ready and the resource summary when they change (and
// every few seconds, as a real agent's status period would).
func (m *Member) reportStatus(ctx context.Context, mode Mode) {
	m.mu.Lock()
	pods, dns := m.pods, !m.dnsFault
	key := fmt.Sprintf("%v/%d/%v", mode, pods, dns)
	fresh := key == m.lastKey && time.Since(m.lastPush) < 3*time.Second
	m.mu.Unlock()
	if fresh {
		return
	}
	c, err := m.fc.ClusterV1alpha1().Clusters().Get(ctx, m.Name, metav1.GetOptions{})
	if err != nil {
		return
	}
	ready := metav1.Condition{Type: clusterv1alpha1.ClusterConditionReady, Status: metav1.ConditionTrue, Reason: "ClusterReady", Message: "simulated member is healthy"}
	if mode == ModeNotReady {
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, "ClusterNotReady", "simulated member apiserver is not ready"
	}
	meta.SetStatusCondition(&c.Status.Conditions, ready)
	resolution := metav1.Condition{Type: clusterv1alpha1.ClusterConditionServiceDomainNameResolutionReady, Status: metav1.ConditionTrue,
		Reason: "ServiceDomainNameResolutionReady", Message: "simulated in-cluster DNS resolves"}
	if !dns {
		resolution.Status, resolution.Reason, resolution.Message = metav1.ConditionFalse, "ServiceDomainNameResolutionFailed", "simulated in-cluster DNS fails on every node"
	}
	meta.SetStatusCondition(&c.Status.Conditions, resolution)
	c.Status.KubernetesVersion = "v1.36.3"
	c.Status.ResourceSummary = &clusterv1alpha1.ResourceSummary{Allocatable: corev1.ResourceList{
		corev1.ResourcePods:   *resource.NewQuantity(pods, resource.DecimalSI),
		corev1.ResourceCPU:    *resource.NewQuantity(pods, resource.DecimalSI),
		corev1.ResourceMemory: resource.MustParse("400Gi"),
	}}
	c.Status.APIEnablements = []clusterv1alpha1.APIEnablement{{GroupVersion: "apps/v1", Resources: []clusterv1alpha1.APIResource{{Name: "deployments", Kind: "Deployment"}}},
		{GroupVersion: "v1", Resources: []clusterv1alpha1.APIResource{{Name: "configmaps", Kind: "ConfigMap"}}}}
	if _, err := m.fc.ClusterV1alpha1().Clusters().UpdateStatus(ctx, c, metav1.UpdateOptions{}); err == nil {
		m.mu.Lock()
		m.lastKey, m.lastPush, m.reported = key, time.Now(), true
		m.mu.Unlock()
	}
}

// syncWorks applies every Work of the cluster after a short random delay,
// and releases deleted Works after removing their copy.
func (m *Member) syncWorks(ctx context.Context) {
	works, err := m.works.Works(clusterlifecycle.Namespace(m.Name)).List(everything)
	if err != nil {
		return
	}
	for _, w := range works {
		if w.DeletionTimestamp != nil {
			if !slices.Contains(w.Finalizers, workv1alpha1.ExecutionFinalizer) {
				continue
			}
			m.mu.Lock()
			delete(m.running, w.Name)
			delete(m.pending, w.Name)
			m.mu.Unlock()
			cp := w.DeepCopy()
			cp.Finalizers = slices.DeleteFunc(cp.Finalizers, func(f string) bool { return f == workv1alpha1.ExecutionFinalizer })
			_, _ = m.fc.WorkV1alpha1().Works(w.Namespace).Update(ctx, cp, metav1.UpdateOptions{})
			continue
		}
		if !slices.Contains(w.Finalizers, workv1alpha1.ExecutionFinalizer) || len(w.Spec.Workload.Manifests) == 0 {
			continue
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(w.Spec.Workload.Manifests[0].Raw); err != nil {
			continue
		}
		want := Copy{Replicas: replicasOf(obj), Image: imageOf(obj)}
		m.mu.Lock()
		fault := m.appFault
		cur, runs := m.running[w.Name]
		m.mu.Unlock()
		health := workv1alpha1.ResourceHealthy
		if fault {
			health = workv1alpha1.ResourceUnhealthy
		}
		if runs && cur == want && reportedFor(w, health) {
			continue
		}
		// "Apply" after a small random delay, as a real member would take
		// to roll out.
		m.mu.Lock()
		since, ok := m.pending[w.Name]
		if !ok {
			m.pending[w.Name] = time.Now().Add(time.Duration(50+m.rng.Intn(500)) * time.Millisecond)
			m.mu.Unlock()
			continue
		}
		if time.Now().Before(since) {
			m.mu.Unlock()
			continue
		}
		m.running[w.Name] = want
		m.mu.Unlock()
		if m.writeWorkStatus(ctx, w, want, health) {
			m.mu.Lock()
			delete(m.pending, w.Name)
			m.mu.Unlock()
		}
	}
}

// reportedFor says whether the Work's status already reports its current
// generation applied with the given health.
func reportedFor(w *workv1alpha1.Work, health workv1alpha1.ResourceHealth) bool {
	c := meta.FindStatusCondition(w.Status.Conditions, workv1alpha1.WorkConditionApplied)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == w.Generation &&
		len(w.Status.ManifestStatuses) == 1 && w.Status.ManifestStatuses[0].Health == health
}

func (m *Member) writeWorkStatus(ctx context.Context, w *workv1alpha1.Work, run Copy, health workv1alpha1.ResourceHealth) bool {
	cur := w.DeepCopy()
	ready := run.Replicas
	if health != workv1alpha1.ResourceHealthy {
		ready = 0
	}
	st, _ := json.Marshal(map[string]int64{"replicas": run.Replicas, "readyReplicas": ready, "availableReplicas": ready, "updatedReplicas": run.Replicas})
	now := metav1.Now()
	meta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{Type: workv1alpha1.WorkConditionApplied, Status: metav1.ConditionTrue,
		Reason: "AppliedSuccessful", Message: "1 manifests applied", ObservedGeneration: w.Generation, LastTransitionTime: now})
	avail := metav1.Condition{Type: workv1alpha1.WorkConditionAvailable, Status: metav1.ConditionTrue, Reason: "Available",
		Message: "every applied object is healthy", ObservedGeneration: w.Generation, LastTransitionTime: now}
	if health != workv1alpha1.ResourceHealthy {
		avail.Status, avail.Reason, avail.Message = metav1.ConditionFalse, "NotAvailable", "not healthy yet: simulated application fault"
	}
	meta.SetStatusCondition(&cur.Status.Conditions, avail)
	obj := &unstructured.Unstructured{}
	_ = obj.UnmarshalJSON(w.Spec.Workload.Manifests[0].Raw)
	cur.Status.ManifestStatuses = []workv1alpha1.ManifestStatus{{
		Identifier: workv1alpha1.ResourceIdentifier{Ordinal: 0, Group: "apps", Version: "v1", Kind: "Deployment", Resource: "deployments",
			Namespace: obj.GetNamespace(), Name: obj.GetName()},
		Status: &runtime.RawExtension{Raw: st}, Health: health}}
	_, err := m.fc.WorkV1alpha1().Works(w.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
	return err == nil
}

func replicasOf(obj *unstructured.Unstructured) int64 {
	n, _, _ := unstructured.NestedInt64(obj.Object, "spec", "replicas")
	return n
}

func imageOf(obj *unstructured.Unstructured) string {
	containers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
	if len(containers) == 0 {
		return ""
	}
	c, _ := containers[0].(map[string]any)
	img, _, _ := unstructured.NestedString(c, "image")
	return img
}
