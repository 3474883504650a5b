package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/flotilla-io/flotilla/agent/app"
	"github.com/flotilla-io/flotilla/pkg/agent/execution"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla-io/flotilla/pkg/testenv"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

func manifest(t *testing.T, obj map[string]any) workv1alpha1.Manifest {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: raw}}
}

func configMap(ns, name string, data map[string]any) map[string]any {
	return map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": ns}, "data": data}
}

// createWork creates a Work as the hub does: with the execution finalizer
// (the agent may only remove it).
func (f *fleet) createWork(t *testing.T, name string, mutate func(*workv1alpha1.Work), manifests ...workv1alpha1.Manifest) {
	t.Helper()
	w := &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.clusterNamespace, Finalizers: []string{workv1alpha1.ExecutionFinalizer}},
		Spec: workv1alpha1.WorkSpec{Workload: workv1alpha1.WorkloadTemplate{Manifests: manifests}}}
	if mutate != nil {
		mutate(w)
	}
	if _, err := f.hubFlotilla.WorkV1alpha1().Works(f.clusterNamespace).Create(context.Background(), w, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (f *fleet) work(t *testing.T, name string) *workv1alpha1.Work {
	t.Helper()
	w, err := f.hubFlotilla.WorkV1alpha1().Works(f.clusterNamespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func (f *fleet) applied(t *testing.T, name string) *metav1.Condition {
	t.Helper()
	return meta.FindStatusCondition(f.work(t, name).Status.Conditions, workv1alpha1.WorkConditionApplied)
}

func (f *fleet) memberConfigMap(t *testing.T, ns, name string) *corev1.ConfigMap {
	t.Helper()
	cm, err := f.member.Kube.CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return cm
}

func (f *fleet) startAgent(t *testing.T) {
	t.Helper()
	f.register(t, "", true)
	runAgent(t, f.fastOptions("node-a"))
}

// A Work is applied with Flotilla's marks into a namespace the agent
// creates, reported Applied with per-manifest health, and its objects are
// restored when edited or deleted on the member.
func TestWorkIsAppliedReportedAndRepaired(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.startAgent(t)
	ctx := context.Background()
	f.createWork(t, "app", nil,
		manifest(t, configMap("shop", "settings", map[string]any{"mode": "blue"})),
		manifest(t, map[string]any{"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": "web", "namespace": "shop"},
			"spec": map[string]any{"ports": []any{map[string]any{"port": 80}}, "selector": map[string]any{"app": "web"}}}))

	poll(t, 30*time.Second, "Applied=True", func() bool {
		c := f.applied(t, "app")
		return c != nil && c.Status == metav1.ConditionTrue
	})
	w := f.work(t, "app")
	if !contains(w.Finalizers, workv1alpha1.ExecutionFinalizer) {
		t.Errorf("finalizers = %v, want %s", w.Finalizers, workv1alpha1.ExecutionFinalizer)
	}
	if len(w.Status.ManifestStatuses) != 2 || w.Status.ManifestStatuses[0].Health != workv1alpha1.ResourceHealthy ||
		w.Status.ManifestStatuses[1].Identifier.Kind != "Service" || w.Status.ManifestStatuses[1].Identifier.Resource != "services" {
		t.Errorf("manifest statuses = %+v", w.Status.ManifestStatuses)
	}
	if !meta.IsStatusConditionTrue(w.Status.Conditions, workv1alpha1.WorkConditionAvailable) {
		t.Errorf("Available not True: %+v", w.Status.Conditions)
	}
	// The namespace the agent created on the way belongs to no Work.
	ns, err := f.member.Kube.CoreV1().Namespaces().Get(ctx, "shop", metav1.GetOptions{})
	if err != nil || ns.Labels[execution.LabelAutoCreatedNamespace] != "true" || ns.Labels[workv1alpha1.LabelManaged] != "" ||
		ns.Annotations[workv1alpha1.AnnotationWorkName] != "" {
		t.Fatalf("namespace shop not created with the auto-created label alone: %v %v", ns, err)
	}
	cm := f.memberConfigMap(t, "shop", "settings")
	if cm.Labels[workv1alpha1.LabelManaged] != "true" || cm.Annotations[workv1alpha1.AnnotationWorkName] != "app" ||
		cm.Annotations[execution.AnnotationCreatedByFlotilla] != "true" {
		t.Fatalf("ConfigMap lacks Flotilla's marks: %v %v", cm.Labels, cm.Annotations)
	}
	for _, mf := range cm.ManagedFields {
		if mf.Manager == "flotilla-agent" && mf.Operation != metav1.ManagedFieldsOperationUpdate {
			t.Errorf("a new object was not made with Create: managedFields %+v", cm.ManagedFields)
		}
	}

	// Drift: an edit is undone, a deletion is undone.
	cm.Data["mode"] = "green"
	if _, err := f.member.Kube.CoreV1().ConfigMaps("shop").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, 10*time.Second, "the edit to be undone", func() bool {
		cm := f.memberConfigMap(t, "shop", "settings")
		return cm != nil && cm.Data["mode"] == "blue"
	})
	if err := f.member.Kube.CoreV1().ConfigMaps("shop").Delete(ctx, "settings", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, 10*time.Second, "the deleted ConfigMap to return", func() bool { return f.memberConfigMap(t, "shop", "settings") != nil })

	// A changed manifest (a key removed) is applied: server-side apply drops
	// the field we no longer own (the Update entry our Create left is
	// converted to an Apply entry first, or the key would stay).
	w = f.work(t, "app")
	w.Spec.Workload.Manifests[0] = manifest(t, configMap("shop", "settings", map[string]any{"color": "red"}))
	if _, err := f.hubFlotilla.WorkV1alpha1().Works(f.clusterNamespace).Update(ctx, w, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, 10*time.Second, "the new manifest", func() bool {
		cm := f.memberConfigMap(t, "shop", "settings")
		_, stale := cm.Data["mode"]
		return cm.Data["color"] == "red" && !stale
	})
}

// An unmanaged object is a Conflict and stays as it is, until the Work says
// Overwrite, which adopts it.
func TestWorkConflictThenOverwrite(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	ctx := context.Background()
	mustCreate(t, func() error {
		_, err := f.member.Kube.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "shared"}, Data: map[string]string{"owner": "someone-else"}}, metav1.CreateOptions{})
		return err
	})
	f.startAgent(t)
	f.createWork(t, "conflict", nil, manifest(t, configMap("default", "shared", map[string]any{"owner": "flotilla"})))
	poll(t, 30*time.Second, "Applied=False Conflict", func() bool {
		c := f.applied(t, "conflict")
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == "Conflict" && strings.Contains(c.Message, "not managed by Flotilla")
	})
	if cm := f.memberConfigMap(t, "default", "shared"); cm.Data["owner"] != "someone-else" || cm.Labels[workv1alpha1.LabelManaged] != "" {
		t.Fatalf("the unmanaged ConfigMap was changed: %+v", cm)
	}

	w := f.work(t, "conflict")
	w.Spec.ConflictResolution = policyv1alpha1.ConflictOverwrite
	if _, err := f.hubFlotilla.WorkV1alpha1().Works(f.clusterNamespace).Update(ctx, w, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, 10*time.Second, "adoption", func() bool {
		cm := f.memberConfigMap(t, "default", "shared")
		c := f.applied(t, "conflict")
		return cm.Data["owner"] == "flotilla" && cm.Labels[workv1alpha1.LabelManaged] == "true" && c.Status == metav1.ConditionTrue
	})
}

// One good manifest, one the apiserver refuses, one of a kind the member does
// not serve: the good one is applied, the others are reported with reasons.
func TestWorkWithBadManifests(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.startAgent(t)
	f.createWork(t, "mixed", nil,
		manifest(t, configMap("default", "good", map[string]any{"k": "v"})),
		manifest(t, map[string]any{"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": "bad", "namespace": "default"},
			"spec": map[string]any{"ports": []any{map[string]any{"port": 999999}}}}),
		manifest(t, map[string]any{"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": map[string]any{"name": "g", "namespace": "default"}}),
		manifest(t, configMap("default", "good-too", map[string]any{"k": "v"})))
	poll(t, 30*time.Second, "Applied=False naming the bad manifests", func() bool {
		c := f.applied(t, "mixed")
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == "AppliedFailed" &&
			strings.Contains(c.Message, "manifest 1") && strings.Contains(c.Message, "999999") &&
			strings.Contains(c.Message, "manifest 2") && strings.Contains(c.Message, "not served by this member")
	})
	if f.memberConfigMap(t, "default", "good") == nil || f.memberConfigMap(t, "default", "good-too") == nil {
		t.Fatal("the good manifests were not applied")
	}
}

// Deleting a Work deletes what it applied, then the finalizer goes; with
// preserveResourcesOnDeletion the objects stay without Flotilla's marks; an
// object Flotilla does not manage is never deleted.
func TestWorkDeletion(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	ctx := context.Background()
	mustCreate(t, func() error {
		_, err := f.member.Kube.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "theirs"}}, metav1.CreateOptions{})
		return err
	})
	f.startAgent(t)
	f.createWork(t, "gone", nil, manifest(t, configMap("default", "gone", nil)), manifest(t, configMap("default", "theirs", nil)))
	f.createWork(t, "kept", func(w *workv1alpha1.Work) { w.Spec.PreserveResourcesOnDeletion = ptr.To(true) },
		manifest(t, configMap("default", "kept", nil)))
	poll(t, 30*time.Second, "both Works processed", func() bool {
		a, b := f.applied(t, "gone"), f.applied(t, "kept")
		return a != nil && b != nil && b.Status == metav1.ConditionTrue
	})
	for _, name := range []string{"gone", "kept"} {
		if err := f.hubFlotilla.WorkV1alpha1().Works(f.clusterNamespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	poll(t, 30*time.Second, "both Works gone from the hub", func() bool {
		_, errA := f.hubFlotilla.WorkV1alpha1().Works(f.clusterNamespace).Get(ctx, "gone", metav1.GetOptions{})
		_, errB := f.hubFlotilla.WorkV1alpha1().Works(f.clusterNamespace).Get(ctx, "kept", metav1.GetOptions{})
		return apierrors.IsNotFound(errA) && apierrors.IsNotFound(errB)
	})
	if f.memberConfigMap(t, "default", "gone") != nil {
		t.Error("the managed ConfigMap of the deleted Work is still there")
	}
	if f.memberConfigMap(t, "default", "theirs") == nil {
		t.Error("an unmanaged ConfigMap was deleted")
	}
	kept := f.memberConfigMap(t, "default", "kept")
	if kept == nil || kept.Labels[workv1alpha1.LabelManaged] != "" || kept.Annotations[workv1alpha1.AnnotationWorkName] != "" {
		t.Errorf("preserved ConfigMap = %+v, want it kept without Flotilla's marks", kept)
	}
}

// While the agent cannot reach the hub nothing on the member changes; once
// it can, a Work deleted meanwhile is processed. A Work that vanished without
// its finalizer leaves its objects alone for the orphan grace period.
func TestWorkSurvivesAHubOutage(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.register(t, "", true)
	proxy := startTCPProxy(t, f.hub.Config.Host)
	cfg := rest.CopyConfig(f.hub.Config)
	cfg.Host = proxy.url
	opts := f.fastOptions("node-a")
	opts.HubKubeconfig = f.hub.KubeconfigFor(t, cfg)
	runAgent(t, opts)
	ctx := context.Background()
	f.createWork(t, "deleted-meanwhile", nil, manifest(t, configMap("default", "a", nil)))
	f.createWork(t, "vanished", nil, manifest(t, configMap("default", "b", nil)))
	poll(t, 30*time.Second, "both applied", func() bool {
		return f.memberConfigMap(t, "default", "a") != nil && f.memberConfigMap(t, "default", "b") != nil &&
			contains(f.work(t, "vanished").Finalizers, workv1alpha1.ExecutionFinalizer)
	})

	proxy.cut()
	if err := f.hubFlotilla.WorkV1alpha1().Works(f.clusterNamespace).Delete(ctx, "deleted-meanwhile", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// "vanished" disappears without its finalizer running (a hub restored
	// from an old backup looks like this).
	w := f.work(t, "vanished")
	w.Finalizers = nil
	if _, err := f.hubFlotilla.WorkV1alpha1().Works(f.clusterNamespace).Update(ctx, w, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := f.hubFlotilla.WorkV1alpha1().Works(f.clusterNamespace).Delete(ctx, "vanished", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for range 30 { // 3 seconds of outage: nothing on the member moves
		if f.memberConfigMap(t, "default", "a") == nil || f.memberConfigMap(t, "default", "b") == nil {
			t.Fatal("a member object changed while the hub was unreachable")
		}
		time.Sleep(100 * time.Millisecond)
	}

	proxy.restore()
	poll(t, 60*time.Second, "the Work deleted meanwhile to be processed", func() bool {
		_, err := f.hubFlotilla.WorkV1alpha1().Works(f.clusterNamespace).Get(ctx, "deleted-meanwhile", metav1.GetOptions{})
		return apierrors.IsNotFound(err) && f.memberConfigMap(t, "default", "a") == nil
	})
	if f.memberConfigMap(t, "default", "b") == nil {
		t.Error("the vanished Work's object was deleted before the orphan grace period")
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// tcpProxy forwards to an apiserver and can cut every connection, playing a
// hub that is unreachable.
type tcpProxy struct {
	url    string
	target string
	ln     net.Listener
	mu     sync.Mutex
	down   bool
	conns  map[net.Conn]struct{}
}

func startTCPProxy(t *testing.T, host string) *tcpProxy {
	t.Helper()
	u, err := url.Parse(host)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{url: "https://" + ln.Addr().String(), target: u.Host, ln: ln, conns: map[net.Conn]struct{}{}}
	go p.serve()
	t.Cleanup(func() { _ = ln.Close(); p.cut() })
	return p
}

func (p *tcpProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue
		}
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.mu.Unlock()
		go func() { _, _ = io.Copy(up, c); _ = up.Close() }()
		go func() { _, _ = io.Copy(c, up); _ = c.Close() }()
	}
}

func (p *tcpProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.conns = map[net.Conn]struct{}{}
}

func (p *tcpProxy) restore() {
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}

// A managed object whose Work vanished from the hub without its finalizer is
// deleted once the orphan grace period has passed (shortened here; 60m by
// default), and not before the Work is gone.
func TestOrphanIsDeletedAfterTheGracePeriod(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.register(t, "", true)
	opts := f.fastOptions("node-a")
	opts.OrphanGracePeriod = 2 * time.Second // below the flag's minimum: tests only
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = app.Run(ctx, opts) }()
	t.Cleanup(func() { cancel(); <-done })

	f.createWork(t, "short-lived", nil, manifest(t, configMap("default", "orphan", nil)))
	poll(t, 30*time.Second, "applied with the finalizer", func() bool {
		c := f.applied(t, "short-lived")
		return c != nil && c.Status == metav1.ConditionTrue
	})
	w := f.work(t, "short-lived")
	w.Finalizers = nil
	if _, err := f.hubFlotilla.WorkV1alpha1().Works(f.clusterNamespace).Update(context.Background(), w, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := f.hubFlotilla.WorkV1alpha1().Works(f.clusterNamespace).Delete(context.Background(), "short-lived", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, 30*time.Second, "the orphan to be deleted", func() bool { return f.memberConfigMap(t, "default", "orphan") == nil })
}

// A suspended Work (its policy's suspension) is neither applied nor
// repaired, and says so; resuming applies it. Deletion is not suspended.
func TestWorkSuspendDispatching(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.startAgent(t)
	ctx := context.Background()
	f.createWork(t, "held", func(w *workv1alpha1.Work) { w.Spec.SuspendDispatching = ptr.To(true) },
		manifest(t, configMap("shop", "held", map[string]any{"mode": "blue"})))
	poll(t, 30*time.Second, "Dispatching=False SuspendDispatching", func() bool {
		c := meta.FindStatusCondition(f.work(t, "held").Status.Conditions, workv1alpha1.WorkConditionDispatching)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == "SuspendDispatching"
	})
	if cm := f.memberConfigMap(t, "shop", "held"); cm != nil {
		t.Fatalf("a suspended Work was applied: %v", cm)
	}

	w := f.work(t, "held")
	w.Spec.SuspendDispatching = nil
	if _, err := f.hubFlotilla.WorkV1alpha1().Works(f.clusterNamespace).Update(ctx, w, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, 30*time.Second, "applied once resumed", func() bool {
		c := meta.FindStatusCondition(f.work(t, "held").Status.Conditions, workv1alpha1.WorkConditionDispatching)
		return f.memberConfigMap(t, "shop", "held") != nil && c != nil && c.Status == metav1.ConditionTrue
	})

	// Suspended again: an edit on the member stays.
	w = f.work(t, "held")
	w.Spec.SuspendDispatching = ptr.To(true)
	if _, err := f.hubFlotilla.WorkV1alpha1().Works(f.clusterNamespace).Update(ctx, w, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, 30*time.Second, "suspended again", func() bool {
		c := meta.FindStatusCondition(f.work(t, "held").Status.Conditions, workv1alpha1.WorkConditionDispatching)
		return c != nil && c.Status == metav1.ConditionFalse
	})
	cm := f.memberConfigMap(t, "shop", "held")
	cm.Data["mode"] = "green"
	if _, err := f.member.Kube.CoreV1().ConfigMaps("shop").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Unsuspended, the repair follows the member event well within a second
	// (TestWorkIsAppliedReportedAndRepaired); suspended, the edit stays.
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if got := f.memberConfigMap(t, "shop", "held").Data["mode"]; got != "green" {
			t.Fatalf("a suspended Work's object was repaired: mode=%s", got)
		}
	}

	// Deletion still releases the member object.
	if err := f.hubFlotilla.WorkV1alpha1().Works(f.clusterNamespace).Delete(ctx, "held", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, 30*time.Second, "the member object deleted with the Work", func() bool { return f.memberConfigMap(t, "shop", "held") == nil })
}

// runAgentUntilStopped runs the agent in-process and returns a function that
// stops it (and waits for it), for tests that restart it with other flags.
func runAgentUntilStopped(t *testing.T, opts *app.Options) (stop func()) {
	t.Helper()
	if err := opts.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := app.Run(ctx, opts); err != nil {
			t.Errorf("agent: %v", err)
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// metricValue reads one series from the agent's /metrics (-1 when absent).
func metricValue(t *testing.T, addr, series string) float64 {
	t.Helper()
	_, body, err := testenv.HTTPGet(context.Background(), addr, "/metrics")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			var f float64
			if _, err := fmt.Sscan(v, &f); err == nil {
				return f
			}
		}
	}
	return -1
}

// workEvents lists the hub events about a Work with the given reason.
func (f *fleet) workEvents(t *testing.T, work, reason string) []corev1.Event {
	t.Helper()
	events, err := f.hub.Kube.CoreV1().Events("").List(context.Background(), metav1.ListOptions{
		FieldSelector: "involvedObject.kind=Work,involvedObject.name=" + work + ",reason=" + reason})
	if err != nil {
		t.Fatal(err)
	}
	return events.Items
}

func tenantWork(namespace string) func(*workv1alpha1.Work) {
	return func(w *workv1alpha1.Work) {
		w.Annotations = map[string]string{workobjects.AnnotationBindingNamespace: namespace, workobjects.AnnotationBindingName: "app-configmap"}
	}
}

// A Work whose source is namespace team-a (as the hub records it) may only
// produce namespaced objects in team-a: a ClusterRoleBinding, a ConfigMap in
// kube-system, one in team-b and a Flotilla kind are refused (condition,
// event, metric), nothing of them is created, and the refusals are not
// retried until the Work changes. A manifest without a namespace lands in
// team-a, not in default.
func TestWorkRefusesWhatItsSourceMayNotProduce(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.register(t, "", true)
	opts := f.fastOptions("node-a")
	opts.MetricsBindAddress = f.metrics
	runAgent(t, opts)
	ctx := context.Background()
	f.createWork(t, "tenant", tenantWork("team-a"),
		manifest(t, map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": map[string]any{"name": "pwned"},
			"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
			"subjects": []any{map[string]any{"kind": "User", "name": "mallory", "apiGroup": "rbac.authorization.k8s.io"}}}),
		manifest(t, configMap("kube-system", "system", nil)),
		manifest(t, configMap("team-b", "neighbour", nil)),
		manifest(t, map[string]any{"apiVersion": "work.flotilla.io/v1alpha1", "kind": "ResourceTemplate", "metadata": map[string]any{"name": "t", "namespace": "team-a"},
			"spec": map[string]any{"manifest": configMap("", "x", nil)}}),
		manifest(t, map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "own"}}))

	poll(t, 30*time.Second, "Applied=False Refused naming every refused manifest", func() bool {
		c := f.applied(t, "tenant")
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == "Refused" &&
			strings.Contains(c.Message, "4 of 5 manifests refused") && strings.Contains(c.Message, "ClusterRoleBinding is cluster-scoped") &&
			strings.Contains(c.Message, "namespace kube-system is not the Work's source namespace team-a") &&
			strings.Contains(c.Message, "namespace team-b is not the Work's source namespace team-a") &&
			strings.Contains(c.Message, "ResourceTemplate.work.flotilla.io is a Flotilla kind")
	})
	if _, err := f.member.Kube.RbacV1().ClusterRoleBindings().Get(ctx, "pwned", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the refused ClusterRoleBinding exists on the member (err %v)", err)
	}
	if f.memberConfigMap(t, "kube-system", "system") != nil || f.memberConfigMap(t, "team-b", "neighbour") != nil {
		t.Error("a refused ConfigMap was created")
	}
	if _, err := f.member.Kube.CoreV1().Namespaces().Get(ctx, "team-b", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the namespace of a refused manifest was created (err %v)", err)
	}
	if f.memberConfigMap(t, "team-a", "own") == nil || f.memberConfigMap(t, "default", "own") != nil {
		t.Error("the admitted manifest without a namespace did not land in the source namespace team-a")
	}
	poll(t, 10*time.Second, "one Warning Refused event", func() bool {
		ev := f.workEvents(t, "tenant", "Refused")
		return len(ev) == 1 && ev[0].Type == corev1.EventTypeWarning && strings.Contains(ev[0].Message, "4 of 5 manifests refused")
	})
	series := func(reason string) string {
		return `flotilla_agent_manifests_refused_total{reason="` + reason + `"}`
	}
	want := map[string]float64{"ClusterScopedKind": 1, "NamespaceNotOfSource": 2, "FlotillaKind": 1}
	poll(t, 10*time.Second, "the refusal metric", func() bool {
		for reason, n := range want {
			if metricValue(t, f.metrics, series(reason)) != n {
				return false
			}
		}
		return true
	})
	// The Work queue is on /metrics too.
	if n := metricValue(t, f.metrics, `workqueue_adds_total{name="work"}`); n < 1 {
		t.Errorf(`workqueue_adds_total{name="work"} = %v, want the Works synced`, n)
	}
	// No hot loop: a refused manifest waits for the Work to change (a
	// failed one would be retried after 1s, 2s, 4s ...).
	refusedApplies := `flotilla_agent_manifest_applies_total{result="Refused"}`
	before := metricValue(t, f.metrics, refusedApplies)
	statusWrites := metricValue(t, f.metrics, `flotilla_agent_work_status_writes_total{result="success"}`)
	for deadline := time.Now().Add(3500 * time.Millisecond); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		if got := metricValue(t, f.metrics, refusedApplies); got != before {
			t.Fatalf("refused manifests were retried: %s went from %v to %v", refusedApplies, before, got)
		}
	}
	if got := metricValue(t, f.metrics, `flotilla_agent_work_status_writes_total{result="success"}`); got != statusWrites {
		t.Errorf("Work status rewritten without a change: %v -> %v", statusWrites, got)
	}

	// The Work changes (the hub re-renders it without the bad manifests):
	// it is applied.
	w := f.work(t, "tenant")
	w.Spec.Workload.Manifests = w.Spec.Workload.Manifests[4:]
	if _, err := f.hubFlotilla.WorkV1alpha1().Works(f.clusterNamespace).Update(ctx, w, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, 30*time.Second, "Applied=True once the refused manifests are gone", func() bool {
		c := f.applied(t, "tenant")
		return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == w.Generation+1
	})
}

// A Work of a cluster-scoped source (or one without the hub's source
// annotation, which counts as one) may produce anything except the protected
// targets: a ConfigMap in kube-system and the Namespace kube-node-lease are
// refused until the agent runs with --allowed-system-namespaces naming them;
// a Flotilla kind until --allow-flotilla-kinds.
func TestWorkIntoASystemNamespaceNeedsTheAgentFlag(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.register(t, "", true)
	ctx := context.Background()
	// The agent's own namespace is protected like the system ones.
	const agentNamespace = "agents"
	mustCreate(t, func() error {
		_, err := f.member.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: agentNamespace}}, metav1.CreateOptions{})
		return err
	})
	opts := f.fastOptions("node-a")
	opts.LeaderElection.ResourceNamespace = agentNamespace
	stop := runAgentUntilStopped(t, opts)
	f.createWork(t, "admin", tenantWork(""),
		manifest(t, configMap("kube-system", "tuning", map[string]any{"k": "v"})),
		manifest(t, map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "kube-node-lease"}}),
		manifest(t, map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "in-default"}}),
		manifest(t, map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": map[string]any{"name": "viewer"}}))
	f.createWork(t, "handwritten", nil, manifest(t, configMap(agentNamespace, "agent-settings", nil)),
		manifest(t, map[string]any{"apiVersion": "cluster.flotilla.io/v1alpha1", "kind": "Cluster", "metadata": map[string]any{"name": "fake"},
			"spec": map[string]any{"syncMode": "Pull"}}))
	poll(t, 30*time.Second, "both Works refused", func() bool {
		a, h := f.applied(t, "admin"), f.applied(t, "handwritten")
		return a != nil && a.Reason == "Refused" && strings.Contains(a.Message, "2 of 4 manifests refused") &&
			strings.Contains(a.Message, "namespace kube-system is protected") && strings.Contains(a.Message, "Namespace kube-node-lease is protected") &&
			h != nil && h.Reason == "Refused" && strings.Contains(h.Message, "namespace agents is protected") &&
			strings.Contains(h.Message, "Cluster.cluster.flotilla.io is a Flotilla kind")
	})
	if f.memberConfigMap(t, "kube-system", "tuning") != nil || f.memberConfigMap(t, agentNamespace, "agent-settings") != nil {
		t.Fatal("a refused ConfigMap was created")
	}
	if f.memberConfigMap(t, "default", "in-default") == nil {
		t.Error("a cluster-scoped source's manifest without a namespace did not land in default")
	}
	if _, err := f.member.Kube.RbacV1().ClusterRoles().Get(ctx, "viewer", metav1.GetOptions{}); err != nil {
		t.Errorf("a cluster-scoped source's ClusterRole was not created: %v", err)
	}
	ns, err := f.member.Kube.CoreV1().Namespaces().Get(ctx, "kube-node-lease", metav1.GetOptions{})
	if err != nil || ns.Labels[workv1alpha1.LabelManaged] != "" {
		t.Errorf("the refused Namespace kube-node-lease was touched: %v %v", ns, err)
	}

	memberFlotilla, err := flotillaclient.NewForConfig(f.member.Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := memberFlotilla.ClusterV1alpha1().Clusters().Get(ctx, "fake", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the refused Flotilla kind exists on the member (err %v)", err)
	}

	stop()
	opts = f.fastOptions("node-a")
	opts.LeaderElection.ResourceNamespace = agentNamespace
	opts.AllowedSystemNamespaces = []string{"kube-system", agentNamespace}
	opts.AllowFlotillaKinds = true
	runAgent(t, opts)
	poll(t, 30*time.Second, "the handwritten Work applied with the flags", func() bool {
		c := f.applied(t, "handwritten")
		return c != nil && c.Status == metav1.ConditionTrue
	})
	poll(t, 30*time.Second, "only kube-node-lease still refused", func() bool {
		c := f.applied(t, "admin")
		return c != nil && c.Reason == "Refused" && strings.Contains(c.Message, "1 of 4 manifests refused") &&
			strings.Contains(c.Message, "Namespace kube-node-lease is protected")
	})
	if cm := f.memberConfigMap(t, "kube-system", "tuning"); cm == nil || cm.Data["k"] != "v" {
		t.Errorf("the ConfigMap in kube-system was not applied once the flag allows it: %v", cm)
	}
	if _, err := memberFlotilla.ClusterV1alpha1().Clusters().Get(ctx, "fake", metav1.GetOptions{}); err != nil {
		t.Errorf("the Flotilla kind was not applied once the flag allows it: %v", err)
	}
}

// A Work without the execution finalizer (which only the hub adds) is not
// applied, and says so; the agent does not add the finalizer itself. Once
// the finalizer is there, the Work is applied.
func TestWorkWaitsForTheHubsFinalizer(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.startAgent(t)
	ctx := context.Background()
	f.createWork(t, "early", func(w *workv1alpha1.Work) { w.Finalizers = nil }, manifest(t, configMap("default", "early", nil)))
	poll(t, 30*time.Second, "Applied=Unknown WaitingForFinalizer", func() bool {
		c := f.applied(t, "early")
		return c != nil && c.Status == metav1.ConditionUnknown && c.Reason == "WaitingForFinalizer"
	})
	if w := f.work(t, "early"); len(w.Finalizers) != 0 {
		t.Fatalf("the agent added finalizers: %v", w.Finalizers)
	}
	if f.memberConfigMap(t, "default", "early") != nil {
		t.Fatal("a Work without the finalizer was applied")
	}
	w := f.work(t, "early")
	w.Finalizers = []string{workv1alpha1.ExecutionFinalizer}
	if _, err := f.hubFlotilla.WorkV1alpha1().Works(f.clusterNamespace).Update(ctx, w, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, 30*time.Second, "applied once the finalizer is there", func() bool {
		c := f.applied(t, "early")
		return c != nil && c.Status == metav1.ConditionTrue && f.memberConfigMap(t, "default", "early") != nil
	})
}

// A namespace the agent created on the way belongs to no Work: neither the
// deletion of the Work that needed it nor the orphan sweep deletes it, or
// what users put in it.
func TestAutoCreatedNamespaceOutlivesItsWork(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.register(t, "", true)
	opts := f.fastOptions("node-a")
	opts.OrphanGracePeriod = 2 * time.Second // below the flag's minimum: tests only
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = app.Run(ctx, opts) }()
	t.Cleanup(func() { cancel(); <-done })

	f.createWork(t, "needs-shop", nil, manifest(t, configMap("shop", "flotillas", nil)))
	// A Namespace manifest makes the agent watch namespaces, so the sweep
	// sees every namespace carrying Flotilla's marks.
	f.createWork(t, "lists-a-namespace", nil, manifest(t, map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "listed"}}))
	f.createWork(t, "vanishes", nil, manifest(t, configMap("default", "orphan", nil)))
	poll(t, 30*time.Second, "all applied", func() bool {
		for _, w := range []string{"needs-shop", "lists-a-namespace", "vanishes"} {
			if c := f.applied(t, w); c == nil || c.Status != metav1.ConditionTrue {
				return false
			}
		}
		return true
	})
	mustCreate(t, func() error {
		_, err := f.member.Kube.CoreV1().ConfigMaps("shop").Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "users"}}, metav1.CreateOptions{})
		return err
	})

	if err := f.hubFlotilla.WorkV1alpha1().Works(f.clusterNamespace).Delete(context.Background(), "needs-shop", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, 30*time.Second, "the Work gone and its ConfigMap deleted", func() bool {
		_, err := f.hubFlotilla.WorkV1alpha1().Works(f.clusterNamespace).Get(context.Background(), "needs-shop", metav1.GetOptions{})
		return apierrors.IsNotFound(err) && f.memberConfigMap(t, "shop", "flotillas") == nil
	})
	// "vanishes" disappears without its finalizer: once the sweep has
	// deleted its object, the sweep has run past the grace period.
	w := f.work(t, "vanishes")
	w.Finalizers = nil
	if _, err := f.hubFlotilla.WorkV1alpha1().Works(f.clusterNamespace).Update(context.Background(), w, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := f.hubFlotilla.WorkV1alpha1().Works(f.clusterNamespace).Delete(context.Background(), "vanishes", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, 30*time.Second, "the sweep to delete the vanished Work's object", func() bool { return f.memberConfigMap(t, "default", "orphan") == nil })
	ns, err := f.member.Kube.CoreV1().Namespaces().Get(context.Background(), "shop", metav1.GetOptions{})
	if err != nil || ns.DeletionTimestamp != nil {
		t.Fatalf("the auto-created namespace did not survive its Work: %v %v", ns, err)
	}
	if f.memberConfigMap(t, "shop", "users") == nil {
		t.Fatal("a user's ConfigMap in the auto-created namespace is gone")
	}
}

// An object dropped from a Work's manifests (the Work stays) is deleted if
// Flotilla created it and released (marks stripped, object kept) if it was
// adopted; deleting the Work deletes what it created and releases what it
// adopted.
func TestDroppedAndDeletedManifestsDeleteOnlyWhatFlotillaCreated(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	ctx := context.Background()
	for _, name := range []string{"adopted", "adopted-too"} {
		mustCreate(t, func() error {
			_, err := f.member.Kube.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name},
				Data: map[string]string{"owner": "someone"}}, metav1.CreateOptions{})
			return err
		})
	}
	f.startAgent(t)
	overwrite := func(w *workv1alpha1.Work) { w.Spec.ConflictResolution = policyv1alpha1.ConflictOverwrite }
	f.createWork(t, "app", overwrite,
		manifest(t, configMap("default", "created", map[string]any{"k": "v"})),
		manifest(t, configMap("default", "adopted", map[string]any{"owner": "flotilla"})),
		manifest(t, configMap("default", "created-too", map[string]any{"k": "v"})),
		manifest(t, configMap("default", "adopted-too", map[string]any{"owner": "flotilla"})))
	poll(t, 30*time.Second, "applied", func() bool {
		c := f.applied(t, "app")
		return c != nil && c.Status == metav1.ConditionTrue
	})
	if cm := f.memberConfigMap(t, "default", "adopted"); cm.Annotations[execution.AnnotationCreatedByFlotilla] != "" || cm.Labels[workv1alpha1.LabelManaged] != "true" {
		t.Fatalf("an adopted object is marked as created by Flotilla, or not managed: %v %v", cm.Labels, cm.Annotations)
	}

	w := f.work(t, "app")
	w.Spec.Workload.Manifests = w.Spec.Workload.Manifests[2:]
	if _, err := f.hubFlotilla.WorkV1alpha1().Works(f.clusterNamespace).Update(ctx, w, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, 30*time.Second, "the dropped created object deleted, the dropped adopted one released", func() bool {
		cm := f.memberConfigMap(t, "default", "adopted")
		return f.memberConfigMap(t, "default", "created") == nil && cm != nil && cm.Labels[workv1alpha1.LabelManaged] == "" &&
			cm.Annotations[workv1alpha1.AnnotationWorkName] == ""
	})
	if cm := f.memberConfigMap(t, "default", "adopted"); cm.Data["owner"] != "flotilla" {
		t.Errorf("the released object changed: %v", cm.Data)
	}

	if err := f.hubFlotilla.WorkV1alpha1().Works(f.clusterNamespace).Delete(ctx, "app", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, 30*time.Second, "the Work gone", func() bool {
		_, err := f.hubFlotilla.WorkV1alpha1().Works(f.clusterNamespace).Get(ctx, "app", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	if f.memberConfigMap(t, "default", "created-too") != nil {
		t.Error("the object the deleted Work created is still there")
	}
	cm := f.memberConfigMap(t, "default", "adopted-too")
	if cm == nil || cm.Labels[workv1alpha1.LabelManaged] != "" || cm.Annotations[workv1alpha1.AnnotationWorkName] != "" {
		t.Errorf("the object the deleted Work adopted = %v, want it kept without Flotilla's marks", cm)
	}
}
