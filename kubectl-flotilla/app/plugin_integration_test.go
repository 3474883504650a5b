package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"

	hubapp "github.com/flotilla-io/flotilla/hub/app"
	"github.com/flotilla-io/flotilla/kubectl-flotilla/app"
	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla-io/flotilla/pkg/hub/clusterlifecycle"
	"github.com/flotilla-io/flotilla/pkg/testenv"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

const pluginTestManifest = `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"nginx","labels":{"app":"nginx"}},
"spec":{"replicas":3,"selector":{"matchLabels":{"app":"nginx"}},"template":{"metadata":{"labels":{"app":"nginx"}},
"spec":{"containers":[{"name":"nginx","image":"nginx:1.27"}]}}}}`

// The plugin against a real apiserver and the real hub in process: three
// clusters (one tainted), a template with a policy the hub schedules on the
// other two, one member's report; then clusters, where and explain, as
// tables and as JSON read back into the view structs.
func TestKubectlFlotillaAgainstTheHub(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	// The hub publishes the fleet guard's verdict in its namespace.
	if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "flotilla-system"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubeconfig := env.KubeconfigFor(t, env.Config)
	opts := hubapp.NewOptions()
	opts.Kubeconfig = kubeconfig
	// Leader-elected, as installed: the clusters view says which replica leads.
	opts.LeaderElection.LeaderElect = true
	opts.MetricsBindAddress, opts.HealthProbeBindAddress = "0", "0"
	// No agent renews the Leases: keep the clusters out of Unknown.
	opts.ClusterStartupGracePeriod, opts.ClusterMonitorGracePeriod = time.Hour, time.Hour
	done := make(chan error, 1)
	go func() { done <- hubapp.Run(ctx, opts) }()
	t.Cleanup(func() { cancel(); <-done })
	fc := flotillaclient.NewForConfigOrDie(env.Config)

	for _, c := range []struct {
		name, region string
		taints       []corev1.Taint
	}{
		{"member1", "eu", nil}, {"member2", "eu", nil},
		{"member3", "us", []corev1.Taint{{Key: "example.com/maintenance", Effect: corev1.TaintEffectNoSchedule}}},
	} {
		created, err := fc.ClusterV1alpha1().Clusters().Create(ctx, &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: c.name},
			Spec: clusterv1alpha1.ClusterSpec{Region: c.region, Taints: c.taints}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pluginTestUntil(t, "cluster "+c.name+" Ready", func() (bool, error) {
			cur, err := fc.ClusterV1alpha1().Clusters().Get(ctx, created.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			meta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{Type: clusterv1alpha1.ClusterConditionReady,
				Status: metav1.ConditionTrue, Reason: "ClusterReady", Message: "set by the test"})
			cur.Status.KubernetesVersion = "v1.31.0"
			_, err = fc.ClusterV1alpha1().Clusters().UpdateStatus(ctx, cur, metav1.UpdateOptions{})
			return err == nil, nil
		})
	}
	// member1's agent renews its Lease (the hub made it).
	renewed := metav1.NewMicroTime(time.Now())
	pluginTestUntil(t, "member1's Lease renewed", func() (bool, error) {
		l, err := env.Kube.CoordinationV1().Leases(clusterlifecycle.Namespace("member1")).Get(ctx, "member1", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		holder := "agent-7f9c"
		l.Spec.RenewTime, l.Spec.HolderIdentity = &renewed, &holder
		_, err = env.Kube.CoordinationV1().Leases(l.Namespace).Update(ctx, l, metav1.UpdateOptions{})
		return err == nil, nil
	})

	ns := "default"
	tmpl := &workv1alpha1.ResourceTemplate{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: workv1alpha1.ResourceTemplateSpec{Manifest: workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: []byte(pluginTestManifest)}}}}
	if _, err := fc.WorkV1alpha1().ResourceTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "nginx"}},
			Placement: policyv1alpha1.Placement{ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
				ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDuplicated}},
		}}
	if _, err := fc.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := "nginx-deployment"
	var rb *workv1alpha1.ResourceBinding
	pluginTestUntil(t, "the hub schedules on member1 and member2 and records its decision", func() (bool, error) {
		b, err := fc.WorkV1alpha1().ResourceBindings(ns).Get(ctx, binding, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		rb = b
		return len(b.Spec.Clusters) == 2 && b.Status.SchedulingDecision != nil, nil
	})
	// member1's agent reports the Deployment applied and available.
	pluginTestUntil(t, "member1's Work status written", func() (bool, error) {
		w, err := fc.WorkV1alpha1().Works(clusterlifecycle.Namespace("member1")).Get(ctx, workobjects.WorkName(ns, binding), metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		meta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{Type: workv1alpha1.WorkConditionApplied, Status: metav1.ConditionTrue,
			Reason: "Applied", Message: "applied", ObservedGeneration: w.Generation})
		w.Status.ManifestStatuses = []workv1alpha1.ManifestStatus{{
			Identifier: workv1alpha1.ResourceIdentifier{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: ns, Name: "nginx"},
			Status:     &runtime.RawExtension{Raw: []byte(`{"replicas":3,"readyReplicas":3,"availableReplicas":3,"updatedReplicas":3}`)},
			Health:     workv1alpha1.ResourceHealthy}}
		_, err = fc.WorkV1alpha1().Works(w.Namespace).UpdateStatus(ctx, w, metav1.UpdateOptions{})
		return err == nil, nil
	})

	run := func(args ...string) (string, string, error) {
		var out, errOut bytes.Buffer
		cmd := app.NewCommand(&out, &errOut)
		cmd.SetArgs(append(args, "--kubeconfig", kubeconfig))
		err := cmd.ExecuteContext(ctx)
		return out.String(), errOut.String(), err
	}
	mustRun := func(args ...string) string {
		t.Helper()
		out, errOut, err := run(args...)
		if err != nil {
			t.Fatalf("kubectl flotilla %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
		}
		t.Logf("kubectl flotilla %s\n%s%s", strings.Join(args, " "), out, errOut)
		return out
	}

	// clusters: the guard's published verdict, taints, heartbeats.
	var cv app.ClustersView
	pluginTestUntil(t, "clusters shows the published guard verdict", func() (bool, error) {
		out, _, err := run("clusters", "-o", "json")
		if err != nil {
			return false, err
		}
		cv = app.ClustersView{}
		if err := json.Unmarshal([]byte(out), &cv); err != nil {
			return false, fmt.Errorf("%w: %s", err, out)
		}
		return cv.Guard.Published && cv.Guard.Total == 3, nil
	})
	if cv.Guard.Mode != "Normal" || len(cv.Clusters) != 3 {
		t.Fatalf("clusters view %+v", cv)
	}
	if !cv.Hub.Current || cv.Hub.Leader == "" || cv.Hub.Since == nil {
		t.Errorf("hub %+v, want the leading replica, current, with its start", cv.Hub)
	}
	m1, m3 := cv.Clusters[0], cv.Clusters[2]
	if m1.Name != "member1" || m1.Ready != "True" || m1.ReadyReason != "ClusterReady" || m1.LastHeartbeat == nil ||
		!m1.LastHeartbeat.Time.Equal(renewed.Truncate(time.Second)) || m1.Agent != "agent-7f9c" || m1.RegionGuard != "Normal" {
		t.Errorf("member1 %+v", m1)
	}
	if m3.Name != "member3" || len(m3.Taints) != 1 || m3.Taints[0] != "example.com/maintenance:NoSchedule" || m3.LastHeartbeat != nil {
		t.Errorf("member3 %+v", m3)
	}
	table := mustRun("clusters", "-o", "wide")
	for _, want := range []string{"Hub: " + cv.Hub.Leader + " leads, since", "NAME", "GUARD", "LAST-HEARTBEAT", "Normal/Normal", "example.com/maintenance:NoSchedule", "<never>", "agent-7f9c", "v1.31.0"} {
		if !strings.Contains(table, want) {
			t.Errorf("clusters table lacks %q", want)
		}
	}
	// A hub that publishes nothing (older, or in another namespace): the
	// guard is unknown, not an error.
	out := mustRun("clusters", "--hub-namespace", "elsewhere")
	if !strings.Contains(out, "unknown/unknown") || !strings.Contains(out, "Hub: no leader") {
		t.Errorf("without the guard ConfigMap the guard is not unknown:\n%s", out)
	}

	// where: by template name (context namespace) and by kind/name.
	var wv app.WhereView
	pluginTestUntil(t, "where shows member1's report", func() (bool, error) {
		out, _, err := run("where", "web", "-o", "json")
		if err != nil {
			return false, err
		}
		wv = app.WhereView{}
		if err := json.Unmarshal([]byte(out), &wv); err != nil {
			return false, fmt.Errorf("%w: %s", err, out)
		}
		return len(wv.Clusters) == 2 && wv.Clusters[0].Ready != nil && wv.Clusters[0].Applied == "True", nil
	})
	if wv.Binding != "default/nginx-deployment" || wv.Resource != "Deployment/nginx" || wv.Replicas != 3 ||
		wv.Clusters[0].Cluster != "member1" || *wv.Clusters[0].Ready != 3 || *wv.Clusters[0].Available != 3 ||
		wv.Clusters[0].Health != "Healthy" || !wv.Clusters[1].Scheduled || wv.Clusters[1].Replicas != 3 || wv.Clusters[1].Ready != nil {
		t.Errorf("where view %+v", wv)
	}
	var scheduled bool
	for _, c := range wv.Conditions {
		scheduled = scheduled || c.Object == "Binding" && c.Type == "Scheduled" && c.Status == "True"
	}
	if !scheduled {
		t.Errorf("where conditions %+v lack the binding's Scheduled=True", wv.Conditions)
	}
	table = mustRun("where", "deploy/nginx", "-n", ns)
	for _, want := range []string{"ResourceTemplate:", "web", "CLUSTER", "member1", "member2", "Healthy", "Conditions:", "Scheduled"} {
		if !strings.Contains(table, want) {
			t.Errorf("where table lacks %q", want)
		}
	}

	// where without TEMPLATE: the namespace's bindings; -A: all of them.
	var list app.WhereListView
	if err := json.Unmarshal([]byte(mustRun("where", "-A", "-o", "json")), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Namespace != ns || list.Items[0].Template != "ResourceTemplate/web" ||
		strings.Join(list.Items[0].Clusters, ",") != "member1(3),member2(3)" || list.Items[0].Scheduled != "True" {
		t.Errorf("where -A %+v", list)
	}
	table = mustRun("where")
	for _, want := range []string{"TEMPLATE", "CLUSTERS", "ResourceTemplate/web", "Deployment/nginx", "member1(3),member2(3)"} {
		if !strings.Contains(table, want) {
			t.Errorf("where (list) lacks %q", want)
		}
	}
	if out, _, err := run("where", "-n", "kube-system"); err != nil || strings.Contains(out, "web") {
		t.Errorf("where -n kube-system: %v %q", err, out)
	}

	// kubectl's habits: KUBECONFIG (no --kubeconfig), --context, and the
	// context's namespace as the default of -n.
	raw, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	teamA := raw.Contexts[raw.CurrentContext].DeepCopy()
	teamA.Namespace = "team-a"
	raw.Contexts["team-a"] = teamA
	raw.CurrentContext = "team-a"
	envKubeconfig := filepath.Join(t.TempDir(), "config")
	if err := clientcmd.WriteToFile(*raw, envKubeconfig); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", envKubeconfig)
	runEnv := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		cmd := app.NewCommand(&out, &errOut)
		cmd.SetArgs(args)
		err := cmd.ExecuteContext(ctx)
		return out.String() + errOut.String(), err
	}
	if out, err := runEnv("where", "web"); err == nil || !strings.Contains(err.Error(), `"web" not found`) {
		t.Errorf("where web in the current context's namespace team-a: %v %s", err, out)
	}
	if out, err := runEnv("where", "web", "--context", "testenv"); err != nil || !strings.Contains(out, "default/nginx-deployment") {
		t.Errorf("where web --context testenv (namespace unset: default): %v %s", err, out)
	}
	if out, err := runEnv("where", "web", "-n", "default"); err != nil || !strings.Contains(out, "default/nginx-deployment") {
		t.Errorf("where web -n default: %v %s", err, out)
	}
	if _, err := runEnv("clusters", "--context", "nope"); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("clusters --context nope: %v", err)
	}

	// explain: the scheduler's recorded decision.
	var ev app.ExplainView
	if err := json.Unmarshal([]byte(mustRun("explain", "web", "-o", "json")), &ev); err != nil {
		t.Fatal(err)
	}
	results := map[string]app.ExplainCluster{}
	for _, c := range ev.Clusters {
		results[c.Cluster] = c
	}
	if !ev.Recorded || ev.DecidedTime == nil || results["member1"].Result != app.ResultSelected || results["member2"].Result != app.ResultSelected ||
		results["member3"].Result != app.ResultFiltered || results["member3"].Reason != workv1alpha1.DecisionTaintUntolerated {
		t.Errorf("explain view %+v (binding decision %+v)", ev, rb.Status.SchedulingDecision)
	}
	table = mustRun("explain", "web")
	for _, want := range []string{"CLUSTER", "RESULT", "SCORE", "member1", "Selected", "member3", "Filtered"} {
		if !strings.Contains(table, want) {
			t.Errorf("explain table lacks %q", want)
		}
	}
	table = mustRun("explain", "web", "--cluster", "member3")
	for _, want := range []string{"Decided:", "CLUSTER", "RESULT", "member3", "Filtered", "TaintUntolerated", "example.com/maintenance"} {
		if !strings.Contains(table, want) {
			t.Errorf("explain table lacks %q", want)
		}
	}
	if strings.Contains(table, "\nmember1 ") {
		t.Errorf("explain --cluster member3 shows member1:\n%s", table)
	}

	// member2 is drained (a NoExecute taint the policy does not tolerate;
	// timeAdded as the hub's own taints carry it): the hub evicts the
	// workload from it, and where shows the eviction and its failover
	// history item (recorded even when the graceful task ends at once).
	pluginTestUntil(t, "member2 tainted NoExecute", func() (bool, error) {
		c, err := fc.ClusterV1alpha1().Clusters().Get(ctx, "member2", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c.Spec.Taints = append(c.Spec.Taints, corev1.Taint{Key: "example.com/drain", Effect: corev1.TaintEffectNoExecute, TimeAdded: &metav1.Time{Time: time.Now()}})
		_, err = fc.ClusterV1alpha1().Clusters().Update(ctx, c, metav1.UpdateOptions{})
		return err == nil, nil
	})
	pluginTestUntil(t, "where shows member2's eviction", func() (bool, error) {
		out, _, err := run("where", "web", "-o", "json")
		if err != nil {
			return false, err
		}
		wv = app.WhereView{}
		if err := json.Unmarshal([]byte(out), &wv); err != nil {
			return false, err
		}
		return len(wv.Evictions) > 0 && wv.Evictions[0].Cluster == "member2" && len(wv.FailoverHistory) > 0, nil
	}, func() string {
		b, err := fc.WorkV1alpha1().ResourceBindings(ns).Get(ctx, binding, metav1.GetOptions{})
		c, err2 := fc.ClusterV1alpha1().Clusters().Get(ctx, "member2", metav1.GetOptions{})
		if err != nil || err2 != nil {
			return fmt.Sprint(err, err2)
		}
		return fmt.Sprintf("binding spec.clusters %+v tasks %+v eviction history %+v status %+v; member2 taints %+v; where view %+v",
			b.Spec.Clusters, b.Spec.GracefulEvictionTasks, b.Spec.EvictionHistory, b.Status, c.Spec.Taints, wv)
	})
	if e := wv.Evictions[0]; e.Reason != workv1alpha1.EvictionReasonTaintUntolerated || e.EvictedAt.IsZero() {
		t.Errorf("evictions %+v", wv.Evictions)
	}
	if h := wv.FailoverHistory; h[0].From != "member2" || h[0].Reason != workv1alpha1.EvictionReasonTaintUntolerated {
		t.Errorf("failover history %+v", h)
	}
	for _, c := range wv.Clusters {
		if c.Cluster == "member2" && c.Scheduled {
			t.Errorf("member2 still scheduled after its eviction: %+v", wv.Clusters)
		}
	}
	table = mustRun("where", "web")
	for _, want := range []string{"Recent evictions", "TaintUntolerated", "member2"} {
		if !strings.Contains(table, want) {
			t.Errorf("where table after the eviction lacks %q", want)
		}
	}

	// The built binary, run by kubectl as a plugin (kubectl finds
	// kubectl-flotilla in PATH), with KUBECONFIG and --context.
	kubectl := filepath.Join(testenv.AssetsDir(env.Root), "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		if kubectl, err = exec.LookPath("kubectl"); err != nil {
			t.Skip("no kubectl in bin/ (make tools) or PATH: the plugin was tested in process only")
		}
	}
	pluginDir := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(pluginDir, "kubectl-flotilla"), "./kubectl-flotilla")
	build.Dir, build.Env = env.Root, append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./kubectl-flotilla: %v\n%s", err, out)
	}
	plugin := exec.CommandContext(ctx, kubectl, "flotilla", "where", "-A", "--context", "testenv", "-o", "json")
	plugin.Env = append(os.Environ(), "PATH="+pluginDir+string(os.PathListSeparator)+os.Getenv("PATH"), "KUBECONFIG="+envKubeconfig)
	var pluginErr bytes.Buffer
	plugin.Stderr = &pluginErr
	pluginOut, err := plugin.Output()
	if err != nil {
		t.Fatalf("kubectl flotilla where -A: %v\n%s", err, pluginErr.String())
	}
	list = app.WhereListView{}
	if err := json.Unmarshal(pluginOut, &list); err != nil || len(list.Items) != 1 || list.Items[0].Binding != binding {
		t.Errorf("kubectl flotilla where -A -o json: %v %+v\n%s", err, list, pluginOut)
	}

	// What does not exist is a clear error, not a crash.
	if _, _, err := run("where", "nope"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("where nope: %v", err)
	}
	if _, _, err := run("explain", "deployment/nope"); err == nil || !strings.Contains(err.Error(), "no binding") {
		t.Errorf("explain deployment/nope: %v", err)
	}
}

// pluginTestUntil polls cond for a minute; describe, if given, says what
// the objects looked like when it gives up.
func pluginTestUntil(t *testing.T, what string, cond func() (bool, error), describe ...func() string) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 60*time.Second, true,
		func(context.Context) (bool, error) { return cond() }); err != nil {
		for _, d := range describe {
			t.Log(d())
		}
		t.Fatalf("waiting until %s: %v", what, err)
	}
}
