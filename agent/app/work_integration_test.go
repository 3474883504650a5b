package app_test

import (
	"context"
	"encoding/json"
	"errors"
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
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
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

func (f *fleet) createWork(t *testing.T, name string, mutate func(*workv1alpha1.Work), manifests ...workv1alpha1.Manifest) {
	t.Helper()
	w := &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.clusterNamespace},
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
	ns, err := f.member.Kube.CoreV1().Namespaces().Get(ctx, "shop", metav1.GetOptions{})
	if err != nil || ns.Labels[workv1alpha1.LabelManaged] != "true" {
		t.Fatalf("namespace shop not created with the managed label: %v %v", ns, err)
	}
	cm := f.memberConfigMap(t, "shop", "settings")
	if cm.Labels[workv1alpha1.LabelManaged] != "true" || cm.Annotations[workv1alpha1.AnnotationWorkName] != "app" {
		t.Fatalf("ConfigMap lacks Flotilla's marks: %v %v", cm.Labels, cm.Annotations)
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
	// the field we no longer own.
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
