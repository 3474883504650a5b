// Package conformance ports behaviours of Karmada's e2e suites
// (karmada-io/karmada test/e2e/suites/base) to Flotilla's API: the same
// setup with karmada.io changed to flotilla.io, the same expectation. Each
// test is named after the Karmada test it comes from and names its file and
// It() text; docs/comparison.md lists every one as passes or differs.
//
// The tests share one control plane and one hub per test binary (TestMain):
// every case has its own namespace and its own clusters, named after the
// case, and selects its objects by name, so cases run in parallel without
// seeing each other. Agents are played in process: on clusters named
// "sim-…" every Work is reported applied and rolled out
// (framework.SimulateWorkAgents); on clusters named "man-…" the case writes
// the status itself (application failover needs Unhealthy). On both, a
// deleted Work's finalizer is released, as an agent does once it has
// deleted the member's objects.
package conformance

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/flotilla-io/flotilla/e2e/framework"
	"github.com/flotilla-io/flotilla/hub/app"
	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	flotillainformers "github.com/flotilla-io/flotilla/pkg/generated/informers"
	"github.com/flotilla-io/flotilla/pkg/testenv"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// Timers of the shared hub: short, so that a failover takes seconds.
// Clusters have no Lease (no agent renews one), so the hub's grace periods
// are long enough never to run out within the suite.
const (
	gracefulEvictionTimeout = 30 * time.Second
	pollTimeout             = 60 * time.Second
)

func hubOptions(kubeconfig string) *app.Options {
	o := app.NewOptions()
	o.Kubeconfig = kubeconfig
	o.KubeAPIQPS, o.KubeAPIBurst = 500, 1000
	o.LeaderElection.LeaderElect = false
	o.MetricsBindAddress, o.HealthProbeBindAddress = "0", "0"
	o.ClusterMonitorGracePeriod, o.ClusterStartupGracePeriod = time.Hour, time.Hour
	o.FailoverEvictionTimeout = time.Second
	o.DefaultNotReadyTolerationSeconds, o.DefaultUnreachableTolerationSeconds = 2, 2
	o.GracefulEvictionTimeout = gracefulEvictionTimeout
	o.ResourceEvictionRate, o.SecondaryEvictionRate = 50, 10
	o.BindingStatusHold, o.TemplateStatusHold = time.Second, time.Second
	return o
}

// fleet is the control plane and hub every case shares.
type fleet struct {
	env    *testenv.Env
	fc     flotillaclient.Interface
	kube   kubernetes.Interface
	stop   func()
	tmpDir string
}

var (
	sharedOnce  sync.Once
	sharedFleet *fleet
	sharedErr   error
	caseCounter atomic.Int32
)

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if sharedFleet != nil {
		sharedFleet.stop()
	}
	os.Exit(code)
}

// startFleet runs the control plane, the whole hub, the simulated agents
// and the finalizer release until stop.
func startFleet() (*fleet, error) {
	env, err := testenv.StartShared()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "flotilla-conformance-")
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	data, err := testenv.Kubeconfig(env.Config)
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "kubeconfig"), data, 0o600)
	}
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	hubDone := make(chan error, 1)
	go func() { hubDone <- app.Run(ctx, hubOptions(filepath.Join(dir, "kubeconfig"))) }()

	agentCfg := rest.CopyConfig(env.Config)
	agentCfg.QPS, agentCfg.Burst = 500, 1000
	agents := flotillaclient.NewForConfigOrDie(agentCfg)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		framework.SimulateWorkAgents(ctx, agents, framework.WorkAgentOptions{NamespacePrefix: "flotilla-es-sim-"})
	}()
	go func() { defer wg.Done(); releaseDeletedWorks(ctx, agents) }()
	f := &fleet{env: env, fc: flotillaclient.NewForConfigOrDie(env.Config), kube: env.Kube, tmpDir: dir}
	f.stop = func() {
		cancel()
		<-hubDone
		wg.Wait()
		_ = env.Stop()
		_ = os.RemoveAll(dir)
	}
	return f, nil
}

// releaseDeletedWorks plays the agents' side of a Work's deletion: once the
// member's objects are gone the agent removes the execution finalizer.
func releaseDeletedWorks(ctx context.Context, fc flotillaclient.Interface) {
	factory := flotillainformers.NewSharedInformerFactory(fc, 0)
	informer := factory.Work().V1alpha1().Works().Informer()
	release := func(obj any) {
		w, ok := obj.(*workv1alpha1.Work)
		if !ok || w.DeletionTimestamp == nil || !slices.Contains(w.Finalizers, workv1alpha1.ExecutionFinalizer) {
			return
		}
		go func() {
			_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				cur, err := fc.WorkV1alpha1().Works(w.Namespace).Get(ctx, w.Name, metav1.GetOptions{})
				if apierrors.IsNotFound(err) {
					return true, nil
				}
				if err != nil {
					return false, nil
				}
				cur.Finalizers = slices.DeleteFunc(cur.Finalizers, func(f string) bool { return f == workv1alpha1.ExecutionFinalizer })
				_, err = fc.WorkV1alpha1().Works(w.Namespace).Update(ctx, cur, metav1.UpdateOptions{})
				return err == nil || apierrors.IsNotFound(err), nil
			})
		}()
	}
	_, _ = informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    release,
		UpdateFunc: func(_, obj any) { release(obj) },
	})
	factory.Start(ctx.Done())
	<-ctx.Done()
	factory.Shutdown()
}

// tc is one conformance case: its own namespace on the hub and its own
// clusters.
type tc struct {
	t    *testing.T
	ctx  context.Context
	fc   flotillaclient.Interface
	kube kubernetes.Interface
	ns   string
	id   string
}

// newCase runs the case in parallel with the others, on the shared fleet,
// in a namespace of its own.
func newCase(t *testing.T) *tc {
	t.Helper()
	if testing.Short() {
		t.Skip("conformance: needs a real kube-apiserver (run without -short)")
	}
	t.Parallel()
	sharedOnce.Do(func() { sharedFleet, sharedErr = startFleet() })
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	f := sharedFleet
	c := &tc{t: t, ctx: context.Background(), fc: f.fc, kube: f.kube, id: fmt.Sprintf("%02d", caseCounter.Add(1))}
	c.ns = "k" + c.id
	if _, err := f.kube.CoreV1().Namespaces().Create(c.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return c
}

// clusterSpec describes a member of a case.
type clusterSpec struct {
	labels           map[string]string
	provider, region string
	zones            []string
	// noRoom: the member reports no room for pods in its first status.
	// The hub takes the not-ready taint off only once its cache holds that
	// status, so a template created next is never decided on the room of
	// an earlier one (a setRoom after registering races it).
	noRoom bool
}

// clusters registers members as a reporting agent leaves them (Ready, room
// for pods), named "<kind>-<case>-<i>" with kind "sim" (Works reported
// rolled out) or "man" (the case reports). It returns their names in order.
func (c *tc) clusters(kind string, specs ...clusterSpec) []string {
	c.t.Helper()
	var names []string
	for i, s := range specs {
		name := fmt.Sprintf("%s-%s-%d", kind, c.id, i+1)
		c.registerCluster(name, s)
		names = append(names, name)
	}
	return names
}

// registerCluster registers one member named name.
func (c *tc) registerCluster(name string, s clusterSpec) {
	c.t.Helper()
	cl := &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: s.labels},
		Spec: clusterv1alpha1.ClusterSpec{Provider: s.provider, Region: s.region, Zones: s.zones}}
	created, err := c.fc.ClusterV1alpha1().Clusters().Create(c.ctx, cl, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	free := -1
	if s.noRoom {
		free = 0
	}
	c.setReadyWithRoom(created, metav1.ConditionTrue, free)
	// Until the hub has taken off the taints of a cluster that had not
	// reported yet, the scheduler leaves it out; a Divided workload
	// scheduled meanwhile would never come to it (a loaded machine made
	// TestKarmada_Rescheduling_Divided_Unjoin_Deployment fail so).
	c.eventually("the hub takes the not-ready taints off "+name, func() (bool, error) {
		cur, err := c.fc.ClusterV1alpha1().Clusters().Get(c.ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return !slices.ContainsFunc(cur.Spec.Taints, func(t corev1.Taint) bool {
			return t.Key == clusterv1alpha1.TaintClusterNotReady || t.Key == clusterv1alpha1.TaintClusterUnreachable
		}), nil
	})
}

// simClusters registers n plain simulated members.
func (c *tc) simClusters(n int) []string {
	return c.clusters("sim", make([]clusterSpec, n)...)
}

func (c *tc) setReady(cl *clusterv1alpha1.Cluster, status metav1.ConditionStatus) {
	c.t.Helper()
	c.setReadyWithRoom(cl, status, -1)
}

// setReadyWithRoom is setReady with room for free pods reported (-1: all
// 110).
func (c *tc) setReadyWithRoom(cl *clusterv1alpha1.Cluster, status metav1.ConditionStatus, free int) {
	c.t.Helper()
	c.eventually("cluster "+cl.Name+" Ready="+string(status), func() (bool, error) {
		meta.SetStatusCondition(&cl.Status.Conditions, metav1.Condition{Type: clusterv1alpha1.ClusterConditionReady,
			Status: status, Reason: "ClusterReady", Message: "set by the conformance test"})
		cl.Status.ResourceSummary = &clusterv1alpha1.ResourceSummary{Allocatable: corev1.ResourceList{
			corev1.ResourcePods:   resource.MustParse("110"),
			corev1.ResourceCPU:    resource.MustParse("100"),
			corev1.ResourceMemory: resource.MustParse("400Gi"),
		}}
		if free >= 0 {
			cl.Status.ResourceSummary.Allocated = corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(int64(110-free), resource.DecimalSI)}
		}
		_, err := c.fc.ClusterV1alpha1().Clusters().UpdateStatus(c.ctx, cl, metav1.UpdateOptions{})
		if err == nil {
			return true, nil
		}
		if cur, gerr := c.fc.ClusterV1alpha1().Clusters().Get(c.ctx, cl.Name, metav1.GetOptions{}); gerr == nil {
			*cl = *cur
		}
		return false, nil
	})
}

// updateCluster changes a cluster, retrying on conflicts.
func (c *tc) updateCluster(name string, change func(*clusterv1alpha1.Cluster)) {
	c.t.Helper()
	c.eventually("cluster "+name+" updated", func() (bool, error) {
		cl, err := c.fc.ClusterV1alpha1().Clusters().Get(c.ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		change(cl)
		_, err = c.fc.ClusterV1alpha1().Clusters().Update(c.ctx, cl, metav1.UpdateOptions{})
		return err == nil, nil
	})
}

// addTaint adds a taint by hand as Karmada's framework.AddClusterTaint
// does: without timeAdded. Karmada's webhook stamps it on admission;
// Flotilla's hub stamps it when it first sees the taint, so a tolerated
// NoExecute taint counts from then (issue 31 item 2).
func (c *tc) addTaint(cluster string, taint corev1.Taint) {
	c.t.Helper()
	taint.TimeAdded = nil
	c.updateCluster(cluster, func(cl *clusterv1alpha1.Cluster) { cl.Spec.Taints = append(cl.Spec.Taints, taint) })
}

// waitTaintStamped waits until the hub has stamped timeAdded on the
// cluster's taint written without one.
func (c *tc) waitTaintStamped(cluster string, taint corev1.Taint) {
	c.t.Helper()
	c.eventually("the hub stamps timeAdded on "+taint.Key+" of "+cluster, func() (bool, error) {
		cl, err := c.fc.ClusterV1alpha1().Clusters().Get(c.ctx, cluster, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		i := slices.IndexFunc(cl.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&taint) })
		return i >= 0 && cl.Spec.Taints[i].TimeAdded != nil, nil
	})
}

func (c *tc) removeTaint(cluster string, taint corev1.Taint) {
	c.t.Helper()
	c.updateCluster(cluster, func(cl *clusterv1alpha1.Cluster) {
		cl.Spec.Taints = slices.DeleteFunc(cl.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&taint) })
	})
}

func (c *tc) eventually(what string, cond func() (bool, error)) {
	c.t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(c.ctx, 100*time.Millisecond, pollTimeout, true, func(context.Context) (bool, error) {
		ok, err := cond()
		if err != nil {
			last = err
		}
		return ok, nil
	})
	if err != nil {
		c.t.Fatalf("waiting for %s: %v (last error: %v)", what, err, last)
	}
}

// never fails if cond turns true within d.
func (c *tc) never(what string, d time.Duration, cond func() bool) {
	c.t.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if cond() {
			c.t.Fatalf("%s", what)
		}
	}
}

// template creates a ResourceTemplate in the case's namespace holding the
// given object (its namespace is set to the case's).
func (c *tc) template(obj map[string]any) string {
	c.t.Helper()
	u := &unstructured.Unstructured{Object: obj}
	u.SetNamespace(c.ns)
	raw, err := u.MarshalJSON()
	if err != nil {
		c.t.Fatal(err)
	}
	rt := &workv1alpha1.ResourceTemplate{ObjectMeta: metav1.ObjectMeta{Name: u.GetName(), Namespace: c.ns},
		Spec: workv1alpha1.ResourceTemplateSpec{Manifest: workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: raw}}}}
	if _, err := c.fc.WorkV1alpha1().ResourceTemplates(c.ns).Create(c.ctx, rt, metav1.CreateOptions{}); err != nil {
		c.t.Fatal(err)
	}
	return workobjects.BindingName(u.GetKind(), u.GetName())
}

// clusterTemplate creates a ClusterResourceTemplate holding obj.
func (c *tc) clusterTemplate(obj map[string]any) string {
	c.t.Helper()
	u := &unstructured.Unstructured{Object: obj}
	raw, err := u.MarshalJSON()
	if err != nil {
		c.t.Fatal(err)
	}
	rt := &workv1alpha1.ClusterResourceTemplate{ObjectMeta: metav1.ObjectMeta{Name: u.GetName()},
		Spec: workv1alpha1.ResourceTemplateSpec{Manifest: workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: raw}}}}
	if _, err := c.fc.WorkV1alpha1().ClusterResourceTemplates().Create(c.ctx, rt, metav1.CreateOptions{}); err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() {
		_ = c.fc.WorkV1alpha1().ClusterResourceTemplates().Delete(context.Background(), u.GetName(), metav1.DeleteOptions{})
	})
	return workobjects.BindingName(u.GetKind(), u.GetName())
}

// updateTemplate changes the object a template holds.
func (c *tc) updateTemplate(name string, change func(*unstructured.Unstructured)) {
	c.t.Helper()
	c.eventually("template "+name+" updated", func() (bool, error) {
		rt, err := c.fc.WorkV1alpha1().ResourceTemplates(c.ns).Get(c.ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(rt.Spec.Manifest.Raw); err != nil {
			return false, err
		}
		change(u)
		if rt.Spec.Manifest.Raw, err = u.MarshalJSON(); err != nil {
			return false, err
		}
		_, err = c.fc.WorkV1alpha1().ResourceTemplates(c.ns).Update(c.ctx, rt, metav1.UpdateOptions{})
		return err == nil, nil
	})
}

// deployment is Karmada's test helper's Deployment (nginx, 3 replicas),
// named name.
func deployment(name string, replicas int64) map[string]any {
	return map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": name, "labels": map[string]any{"app": name}},
		"spec": map[string]any{"replicas": replicas,
			"selector": map[string]any{"matchLabels": map[string]any{"app": name}},
			"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": name}},
				"spec": map[string]any{"containers": []any{map[string]any{"name": "nginx", "image": "nginx:1.19.0",
					"resources": map[string]any{"requests": map[string]any{"cpu": "100m"}}}}}}}}
}

// policy creates a PropagationPolicy in the case's namespace.
func (c *tc) policy(name string, spec policyv1alpha1.PropagationSpec) *policyv1alpha1.PropagationPolicy {
	c.t.Helper()
	p, err := c.fc.PolicyV1alpha1().PropagationPolicies(c.ns).Create(c.ctx,
		&policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.ns}, Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	return p
}

// updatePolicy changes a PropagationPolicy's spec, retrying on conflicts.
func (c *tc) updatePolicy(name string, change func(*policyv1alpha1.PropagationSpec)) {
	c.t.Helper()
	c.eventually("policy "+name+" updated", func() (bool, error) {
		p, err := c.fc.PolicyV1alpha1().PropagationPolicies(c.ns).Get(c.ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		change(&p.Spec)
		_, err = c.fc.PolicyV1alpha1().PropagationPolicies(c.ns).Update(c.ctx, p, metav1.UpdateOptions{})
		return err == nil, nil
	})
}

// selector selects one object by kind and name.
func selector(apiVersion, kind, name string) []policyv1alpha1.ResourceSelector {
	return []policyv1alpha1.ResourceSelector{{APIVersion: apiVersion, Kind: kind, Name: name}}
}

func onClusters(names ...string) *policyv1alpha1.ClusterAffinity {
	return &policyv1alpha1.ClusterAffinity{ClusterNames: names}
}

// binding returns the ResourceBinding, or nil while there is none.
func (c *tc) binding(name string) *workv1alpha1.ResourceBinding {
	c.t.Helper()
	rb, err := c.fc.WorkV1alpha1().ResourceBindings(c.ns).Get(c.ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		c.t.Fatal(err)
	}
	return rb
}

// placed is where a binding is scheduled, sorted, with replicas.
func placed(clusters []workv1alpha1.TargetCluster) map[string]int32 {
	out := map[string]int32{}
	for _, t := range clusters {
		out[t.Name] = t.Replicas
	}
	return out
}

func placedNames(clusters []workv1alpha1.TargetCluster) []string {
	var out []string
	for _, t := range clusters {
		out = append(out, t.Name)
	}
	slices.Sort(out)
	return out
}

// waitScheduled waits until the binding is scheduled to exactly want
// (cluster → replicas; -1 matches any number).
func (c *tc) waitScheduled(binding string, want map[string]int32) *workv1alpha1.ResourceBinding {
	c.t.Helper()
	var rb *workv1alpha1.ResourceBinding
	var got map[string]int32
	c.eventually(fmt.Sprintf("binding %s scheduled as %v", binding, want), func() (bool, error) {
		rb = c.binding(binding)
		if rb == nil {
			return false, nil
		}
		got = placed(rb.Spec.Clusters)
		if len(got) != len(want) {
			return false, fmt.Errorf("scheduled %v", got)
		}
		for name, n := range want {
			r, ok := got[name]
			if !ok || (n >= 0 && r != n) {
				return false, fmt.Errorf("scheduled %v", got)
			}
		}
		return true, nil
	})
	return rb
}

// waitPlacedOn waits until the binding is scheduled to exactly these
// clusters, whatever their replicas.
func (c *tc) waitPlacedOn(binding string, clusters ...string) *workv1alpha1.ResourceBinding {
	c.t.Helper()
	want := map[string]int32{}
	for _, n := range clusters {
		want[n] = -1
	}
	return c.waitScheduled(binding, want)
}

// work returns the binding's Work on cluster (nil while there is none) and
// its first manifest.
func (c *tc) work(cluster, binding string) (*workv1alpha1.Work, *unstructured.Unstructured) {
	c.t.Helper()
	return c.workOf(c.ns, cluster, binding)
}

// workOf is work for a binding of namespace ns ("" for a
// ClusterResourceBinding).
func (c *tc) workOf(ns, cluster, binding string) (*workv1alpha1.Work, *unstructured.Unstructured) {
	c.t.Helper()
	w, err := c.fc.WorkV1alpha1().Works("flotilla-es-"+cluster).Get(c.ctx, workobjects.WorkName(ns, binding), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		c.t.Fatal(err)
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(w.Spec.Workload.Manifests[0].Raw); err != nil {
		c.t.Fatal(err)
	}
	return w, obj
}

// waitClusterPresent is waitPresent for a ClusterResourceBinding.
func (c *tc) waitClusterPresent(binding string, clusters []string, ok func(*unstructured.Unstructured) bool) {
	c.t.Helper()
	for _, cl := range clusters {
		c.eventually(fmt.Sprintf("%s present on %s", binding, cl), func() (bool, error) {
			w, obj := c.workOf("", cl, binding)
			if w == nil || w.DeletionTimestamp != nil {
				return false, nil
			}
			return ok == nil || ok(obj), nil
		})
	}
}

// clusterPolicy creates a ClusterPropagationPolicy, deleted when the case
// ends.
func (c *tc) clusterPolicy(name string, spec policyv1alpha1.PropagationSpec) {
	c.t.Helper()
	if _, err := c.fc.PolicyV1alpha1().ClusterPropagationPolicies().Create(c.ctx,
		&policyv1alpha1.ClusterPropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{}); err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() {
		_ = c.fc.PolicyV1alpha1().ClusterPropagationPolicies().Delete(context.Background(), name, deleteNow)
	})
}

// waitPresent waits until every cluster has the binding's Work (the object
// "present on the member", as Karmada's tests check it) and ok holds for
// its object.
func (c *tc) waitPresent(binding string, clusters []string, ok func(*unstructured.Unstructured) bool) {
	c.t.Helper()
	for _, cl := range clusters {
		c.eventually(fmt.Sprintf("%s present on %s", binding, cl), func() (bool, error) {
			w, obj := c.work(cl, binding)
			if w == nil || w.DeletionTimestamp != nil {
				return false, nil
			}
			return ok == nil || ok(obj), nil
		})
	}
}

// waitGone waits until no cluster of clusters has the binding's Work.
func (c *tc) waitGone(binding string, clusters ...string) {
	c.t.Helper()
	for _, cl := range clusters {
		c.eventually(fmt.Sprintf("%s gone from %s", binding, cl), func() (bool, error) {
			w, _ := c.work(cl, binding)
			return w == nil, nil
		})
	}
}

// waitEvent waits for an event with reason (and message containing substr)
// in the case's namespace.
func (c *tc) waitEvent(reason, substr string) {
	c.t.Helper()
	c.eventually(fmt.Sprintf("event %s %q", reason, substr), func() (bool, error) {
		evs, err := c.kube.CoreV1().Events(c.ns).List(c.ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Reason == reason && strings.Contains(e.Message, substr) {
				return true, nil
			}
		}
		return false, nil
	})
}

// report writes, as the agent of cluster would, the status of the
// binding's workload on it: applied, with health and its replicas ready
// (all or none).
func (c *tc) report(cluster, binding string, health workv1alpha1.ResourceHealth) {
	c.t.Helper()
	c.reportStatus(cluster, binding, health, func(obj *unstructured.Unstructured) string {
		replicas, _, _ := unstructured.NestedInt64(obj.Object, "spec", "replicas")
		ready := replicas
		if health != workv1alpha1.ResourceHealthy {
			ready = 0
		}
		return fmt.Sprintf(`{"observedGeneration":1,"replicas":%d,"readyReplicas":%d,"availableReplicas":%d,"updatedReplicas":%d}`, replicas, ready, ready, replicas)
	})
}

// reportStatus writes, as the agent of cluster would, the binding's object
// applied with health and the status status returns for it.
func (c *tc) reportStatus(cluster, binding string, health workv1alpha1.ResourceHealth, status func(*unstructured.Unstructured) string) {
	c.t.Helper()
	c.eventually(fmt.Sprintf("%s's Work reports %s", cluster, health), func() (bool, error) {
		w, obj := c.work(cluster, binding)
		if w == nil {
			return false, nil
		}
		meta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{Type: workv1alpha1.WorkConditionApplied, Status: metav1.ConditionTrue,
			Reason: "AppliedSuccessful", Message: "applied", ObservedGeneration: w.Generation})
		gvk := obj.GroupVersionKind()
		w.Status.ManifestStatuses = []workv1alpha1.ManifestStatus{{
			Identifier: workv1alpha1.ResourceIdentifier{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind, Namespace: c.ns, Name: obj.GetName()},
			Status:     &runtime.RawExtension{Raw: []byte(status(obj))}, Health: health}}
		_, err := c.fc.WorkV1alpha1().Works(w.Namespace).UpdateStatus(c.ctx, w, metav1.UpdateOptions{})
		return err == nil, nil
	})
}

// waitUnclaimed waits until the template says no policy selects it.
func (c *tc) waitUnclaimed(template string) {
	c.t.Helper()
	c.eventually(template+" Propagated=False NoMatchingPolicy", func() (bool, error) {
		rt, err := c.fc.WorkV1alpha1().ResourceTemplates(c.ns).Get(c.ctx, template, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cond := meta.FindStatusCondition(rt.Status.Conditions, workobjects.TemplateConditionPropagated)
		return cond != nil && cond.Status == metav1.ConditionFalse && cond.Reason == "NoMatchingPolicy", nil
	})
}

// deleteNow deletes with the server's default options.
var deleteNow = metav1.DeleteOptions{}
