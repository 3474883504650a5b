package app_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/flotilla-io/flotilla/hub/app"
	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	networkingv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/networking/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// reportEndpoints writes what an agent writes for the Work's one Service
// manifest: its load-balancer status and its ready endpoints.
func reportEndpoints(t *testing.T, fc flotillaclient.Interface, w *workv1alpha1.Work, ns, ip string, ready int32) {
	t.Helper()
	waitUntil(t, "Work status written", func() (bool, error) {
		cur, err := fc.WorkV1alpha1().Works(w.Namespace).Get(context.Background(), w.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		meta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{Type: workv1alpha1.WorkConditionApplied, Status: metav1.ConditionTrue,
			Reason: "Applied", Message: "applied", ObservedGeneration: cur.Generation})
		cur.Status.ManifestStatuses = []workv1alpha1.ManifestStatus{{
			Identifier:     workv1alpha1.ResourceIdentifier{Version: "v1", Kind: "Service", Namespace: ns, Name: "web"},
			Status:         &runtime.RawExtension{Raw: []byte(fmt.Sprintf(`{"loadBalancer":{"ingress":[{"ip":%q}]}}`, ip))},
			Health:         workv1alpha1.ResourceHealthy,
			ReadyEndpoints: &ready,
		}}
		_, err = fc.WorkV1alpha1().Works(w.Namespace).UpdateStatus(context.Background(), cur, metav1.UpdateOptions{})
		return err == nil, nil
	})
}

// TestBackendsUnreadyLeaveDNS: the whole hub with its embedded DNS server
// on a real apiserver. Both clusters stay Ready and unblocked; when the
// agent of member1 reports no ready endpoints for the backend Service, its
// address leaves the DNS answers, and comes back with them. When no
// cluster has ready endpoints, both are answered (fail open).
func TestBackendsUnreadyLeaveDNS(t *testing.T) {
	// Not parallel: the traffic tests share the package-level dnsAddr.
	dnsAddr = freeUDPAndTCPAddr(t)
	ctx, fc := startHubWith(t, func(o *app.Options) {
		o.ClusterStartupGracePeriod, o.ClusterMonitorGracePeriod = time.Hour, time.Hour
		o.DNSTrafficAddress = dnsAddr
	})
	for _, name := range []string{"member1", "member2"} {
		if _, err := fc.ClusterV1alpha1().Clusters().Create(ctx, &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		setConditions(t, fc, name, map[string]metav1.ConditionStatus{clusterv1alpha1.ClusterConditionReady: metav1.ConditionTrue})
	}
	ns := "default"
	createWebService(t, ctx, fc, ns)
	works := map[string]*workv1alpha1.Work{}
	ips := map[string]string{"member1": "10.0.1.1", "member2": "10.0.2.1"}
	for _, c := range []string{"member1", "member2"} {
		works[c] = waitWork(t, fc, c, ns, workobjects.BindingName("Service", "web"), func(*unstructured.Unstructured) bool { return true })
		reportEndpoints(t, fc, works[c], ns, ips[c], 2)
	}
	mci := &networkingv1alpha1.MultiClusterIngress{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: networkingv1alpha1.MultiClusterIngressSpec{IngressSpec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: "web.example.com", IngressRuleValue: networkingv1.IngressRuleValue{
			HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: ptrTo(networkingv1.PathTypePrefix),
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}}}}}}}}}}
	if _, err := fc.NetworkingV1alpha1().MultiClusterIngresses(ns).Create(ctx, mci, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	placed := []string{"member1", "member2"}
	waitTraffic(t, fc, ns, "web", placed, nil, []string{"10.0.1.1", "10.0.2.1"})

	reportEndpoints(t, fc, works["member1"], ns, ips["member1"], 0)
	waitTraffic(t, fc, ns, "web", placed, nil, []string{"10.0.2.1"})
	got, err := fc.NetworkingV1alpha1().MultiClusterIngresses(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := got.Status.Clusters; len(c) != 2 || c[0].Serving || c[0].Reason != networkingv1alpha1.TrafficReasonNoReadyEndpoints || !c[1].Serving {
		t.Fatalf("status.clusters: %+v", c)
	}

	reportEndpoints(t, fc, works["member1"], ns, ips["member1"], 3)
	waitTraffic(t, fc, ns, "web", placed, nil, []string{"10.0.1.1", "10.0.2.1"})

	// Nothing has ready endpoints: fail open, both answered.
	reportEndpoints(t, fc, works["member1"], ns, ips["member1"], 0)
	reportEndpoints(t, fc, works["member2"], ns, ips["member2"], 0)
	// Both were answered before too: wait for the verdict, then the answers.
	waitUntil(t, "fail open", func() (bool, error) {
		got, err := fc.NetworkingV1alpha1().MultiClusterIngresses(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c := got.Status.Clusters
		return len(c) == 2 && c[0].Reason == networkingv1alpha1.TrafficReasonFailOpen && c[1].Reason == networkingv1alpha1.TrafficReasonFailOpen, nil
	})
	waitTraffic(t, fc, ns, "web", placed, nil, []string{"10.0.1.1", "10.0.2.1"})
}

// reportHealth writes what an agent writes for the Work's one workload
// manifest: applied, with health.
func reportHealth(t *testing.T, fc flotillaclient.Interface, w *workv1alpha1.Work, id workv1alpha1.ResourceIdentifier, health workv1alpha1.ResourceHealth) {
	t.Helper()
	waitUntil(t, "Work status written", func() (bool, error) {
		cur, err := fc.WorkV1alpha1().Works(w.Namespace).Get(context.Background(), w.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		meta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{Type: workv1alpha1.WorkConditionApplied, Status: metav1.ConditionTrue,
			Reason: "Applied", Message: "applied", ObservedGeneration: cur.Generation})
		cur.Status.ManifestStatuses = []workv1alpha1.ManifestStatus{{Identifier: id,
			Status: &runtime.RawExtension{Raw: []byte(`{"replicas":1}`)}, Health: health}}
		_, err = fc.WorkV1alpha1().Works(w.Namespace).UpdateStatus(context.Background(), cur, metav1.UpdateOptions{})
		return err == nil, nil
	})
}

// TestUnhealthyWorkloadLeavesDNS: the whole hub with its embedded DNS
// server. The backend Service has ready endpoints on both clusters, but
// when the Deployment its selector matches is reported Unhealthy on
// member1, member1's address leaves the answers; Healthy again, it comes
// back; Unhealthy everywhere, both are answered (fail open). Another
// namespace's Deployment with the same pod labels, Unhealthy on member2,
// changes nothing.
func TestUnhealthyWorkloadLeavesDNS(t *testing.T) {
	// Not parallel: the traffic tests share the package-level dnsAddr.
	dnsAddr = freeUDPAndTCPAddr(t)
	env, ctx, fc := startHubEnv(t, func(o *app.Options) {
		o.ClusterStartupGracePeriod, o.ClusterMonitorGracePeriod = time.Hour, time.Hour
		o.DNSTrafficAddress = dnsAddr
	})
	clusters := []string{"member1", "member2"}
	for _, name := range clusters {
		if _, err := fc.ClusterV1alpha1().Clusters().Create(ctx, &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		setConditions(t, fc, name, map[string]metav1.ConditionStatus{clusterv1alpha1.ClusterConditionReady: metav1.ConditionTrue})
	}
	const webDeployment = `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},
"spec":{"replicas":1,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"web","image":"nginx"}]}}}}`
	deployID := func(ns string) workv1alpha1.ResourceIdentifier {
		return workv1alpha1.ResourceIdentifier{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: ns, Name: "web"}
	}
	// Each namespace: the Service and the Deployment on both clusters.
	deployWorks := map[string]map[string]*workv1alpha1.Work{}
	for _, ns := range []string{"default", "rival"} {
		if ns != "default" {
			if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		for name, manifest := range map[string]string{"web-svc": webService, "web-deploy": webDeployment} {
			tmpl := &workv1alpha1.ResourceTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Spec: workv1alpha1.ResourceTemplateSpec{Manifest: workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: []byte(manifest)}}}}
			if _, err := fc.WorkV1alpha1().ResourceTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
			Spec: policyv1alpha1.PropagationSpec{
				ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "v1", Kind: "Service", Name: "web"}, {APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
				Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: clusters}},
			}}
		if _, err := fc.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx, policy, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		deployWorks[ns] = map[string]*workv1alpha1.Work{}
		for i, c := range clusters {
			w := waitWork(t, fc, c, ns, workobjects.BindingName("Service", "web"), func(*unstructured.Unstructured) bool { return true })
			reportEndpoints(t, fc, w, ns, fmt.Sprintf("10.0.%d.1", i+1), 2)
			deployWorks[ns][c] = waitWork(t, fc, c, ns, workobjects.BindingName("Deployment", "web"), func(*unstructured.Unstructured) bool { return true })
			reportHealth(t, fc, deployWorks[ns][c], deployID(ns), workv1alpha1.ResourceHealthy)
		}
	}
	mci := &networkingv1alpha1.MultiClusterIngress{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: networkingv1alpha1.MultiClusterIngressSpec{IngressSpec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: "web.example.com", IngressRuleValue: networkingv1.IngressRuleValue{
			HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: ptrTo(networkingv1.PathTypePrefix),
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}}}}}}}}}}
	if _, err := fc.NetworkingV1alpha1().MultiClusterIngresses("default").Create(ctx, mci, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	both := []string{"10.0.1.1", "10.0.2.1"}
	waitTraffic(t, fc, "default", "web", clusters, nil, both)

	// Lying agents. member2's reports no ready endpoints for the
	// Deployment (not a Service): the count is dropped, nothing changes.
	// member1's reports none for the rival tenant's Service on member1:
	// only the rival's answers could change, never this ingress's.
	waitUntil(t, "Work status written", func() (bool, error) {
		cur, err := fc.WorkV1alpha1().Works(deployWorks["default"]["member2"].Namespace).Get(ctx, deployWorks["default"]["member2"].Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cur.Status.ManifestStatuses[0].ReadyEndpoints = ptrTo(int32(0))
		_, err = fc.WorkV1alpha1().Works(cur.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err == nil, nil
	})
	rivalSvc := waitWork(t, fc, "member1", "rival", workobjects.BindingName("Service", "web"), func(*unstructured.Unstructured) bool { return true })
	reportEndpoints(t, fc, rivalSvc, "rival", "10.0.1.1", 0)
	waitUntil(t, "the rival's count reaches its binding", func() (bool, error) {
		rb, err := fc.WorkV1alpha1().ResourceBindings("rival").Get(ctx, workobjects.BindingName("Service", "web"), metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, it := range rb.Status.AggregatedStatus {
			if it.ClusterName == "member1" && it.ReadyEndpoints != nil && *it.ReadyEndpoints == 0 {
				return true, nil
			}
		}
		return false, nil
	})
	waitUntil(t, "the Deployment's binding reports its status", func() (bool, error) {
		rb, err := fc.WorkV1alpha1().ResourceBindings("default").Get(ctx, workobjects.BindingName("Deployment", "web"), metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, it := range rb.Status.AggregatedStatus {
			if it.ReadyEndpoints != nil {
				t.Fatalf("a Deployment's binding holds ready endpoints an agent reported: %+v", it)
			}
		}
		return len(rb.Status.AggregatedStatus) == 2, nil
	})
	waitTraffic(t, fc, "default", "web", clusters, nil, both)

	// The rival tenant's Deployment, same pod labels, Unhealthy on member2.
	reportHealth(t, fc, deployWorks["rival"]["member2"], deployID("rival"), workv1alpha1.ResourceUnhealthy)
	// Our own Deployment Unhealthy on member1: only member2 is answered;
	// had the rival's counted, nothing would be healthy and both would be.
	reportHealth(t, fc, deployWorks["default"]["member1"], deployID("default"), workv1alpha1.ResourceUnhealthy)
	waitTraffic(t, fc, "default", "web", clusters, nil, []string{"10.0.2.1"})
	got, err := fc.NetworkingV1alpha1().MultiClusterIngresses("default").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := got.Status.Clusters; len(c) != 2 || c[0].Serving || c[0].Reason != networkingv1alpha1.TrafficReasonWorkloadUnhealthy ||
		!c[1].Serving || c[1].Reason != networkingv1alpha1.TrafficReasonHealthy {
		t.Fatalf("status.clusters: %+v", c)
	}

	reportHealth(t, fc, deployWorks["default"]["member1"], deployID("default"), workv1alpha1.ResourceHealthy)
	waitTraffic(t, fc, "default", "web", clusters, nil, both)

	// Unhealthy everywhere: fail open, both answered.
	reportHealth(t, fc, deployWorks["default"]["member1"], deployID("default"), workv1alpha1.ResourceUnhealthy)
	reportHealth(t, fc, deployWorks["default"]["member2"], deployID("default"), workv1alpha1.ResourceUnhealthy)
	waitUntil(t, "fail open", func() (bool, error) {
		got, err := fc.NetworkingV1alpha1().MultiClusterIngresses("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c := got.Status.Clusters
		return len(c) == 2 && c[0].Reason == networkingv1alpha1.TrafficReasonFailOpen && c[1].Reason == networkingv1alpha1.TrafficReasonFailOpen, nil
	})
	waitTraffic(t, fc, "default", "web", clusters, nil, both)
}

// Traffic follows a staged rollout as it follows any copy's health: the
// Deployment rolls canary (member1) first; a bad change makes member1's
// copy Unhealthy, its address leaves the DNS answers while it is, the
// revision halts and rolls back, and member1 is answered again once its
// copy is Healthy. member2's copy never changes, and stays answered.
func TestHaltedCanaryLeavesDNSWhileUnhealthy(t *testing.T) {
	// Not parallel: the traffic tests share the package-level dnsAddr.
	dnsAddr = freeUDPAndTCPAddr(t)
	_, ctx, fc := startHubEnv(t, func(o *app.Options) {
		o.ClusterStartupGracePeriod, o.ClusterMonitorGracePeriod = time.Hour, time.Hour
		o.DNSTrafficAddress = dnsAddr
	})
	clusters := []string{"member1", "member2"}
	for _, name := range clusters {
		if _, err := fc.ClusterV1alpha1().Clusters().Create(ctx, &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		setConditions(t, fc, name, map[string]metav1.ConditionStatus{clusterv1alpha1.ClusterConditionReady: metav1.ConditionTrue})
	}
	labelCluster(t, ctx, fc, "member1", "ring", "canary")
	ns := "default"
	const webDeployment = `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},
"spec":{"replicas":1,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"web","image":"nginx:1.27"}]}}}}`
	for name, manifest := range map[string]string{"web-svc": webService, "web-deploy": webDeployment} {
		tmpl := &workv1alpha1.ResourceTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: workv1alpha1.ResourceTemplateSpec{Manifest: workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: []byte(manifest)}}}}
		if _, err := fc.WorkV1alpha1().ResourceTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	policy := stagedPolicy(ns, 3*time.Second, &policyv1alpha1.RolloutRollback{})
	policy.Spec.ResourceSelectors = []policyv1alpha1.ResourceSelector{{APIVersion: "v1", Kind: "Service", Name: "web"}, {APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}}
	policy.Spec.Placement.ClusterAffinity = &policyv1alpha1.ClusterAffinity{ClusterNames: clusters}
	if _, err := fc.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deployment := workobjects.BindingName("Deployment", "web")
	agents := playAgents(t, ctx, fc, clusters, ns, deployment, badImageUnhealthy)
	for i, c := range clusters {
		w := waitWork(t, fc, c, ns, workobjects.BindingName("Service", "web"), func(*unstructured.Unstructured) bool { return true })
		reportEndpoints(t, fc, w, ns, fmt.Sprintf("10.0.%d.1", i+1), 2)
	}
	waitRollout(t, ctx, fc, ns, deployment, "revision 1 complete", func(r *workv1alpha1.RolloutStatus) bool {
		return r.Revision == 1 && r.Phase == workv1alpha1.RolloutPhaseComplete
	})
	mci := &networkingv1alpha1.MultiClusterIngress{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: networkingv1alpha1.MultiClusterIngressSpec{IngressSpec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: "web.example.com", IngressRuleValue: networkingv1.IngressRuleValue{
			HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: ptrTo(networkingv1.PathTypePrefix),
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}}}}}}}}}}
	if _, err := fc.NetworkingV1alpha1().MultiClusterIngresses(ns).Create(ctx, mci, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	both := []string{"10.0.1.1", "10.0.2.1"}
	waitTraffic(t, fc, ns, "web", clusters, nil, both)

	// The bad change: member1 (the canary) Unhealthy leaves the answers.
	waitUntil(t, "the Deployment template changed", func() (bool, error) {
		tmpl, err := fc.WorkV1alpha1().ResourceTemplates(ns).Get(ctx, "web-deploy", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		tmpl.Spec.Manifest.Raw = []byte(strings.Replace(webDeployment, "nginx:1.27", "nginx:bad", 1))
		_, err = fc.WorkV1alpha1().ResourceTemplates(ns).Update(ctx, tmpl, metav1.UpdateOptions{})
		return err == nil, nil
	})
	waitTraffic(t, fc, ns, "web", clusters, nil, []string{"10.0.2.1"})
	// Halted and rolled back: member1 Healthy again, answered again.
	waitRollout(t, ctx, fc, ns, deployment, "revision 2 rolled back", func(r *workv1alpha1.RolloutStatus) bool {
		return r.Revision == 2 && r.Phase == workv1alpha1.RolloutPhaseRolledBack
	})
	waitTraffic(t, fc, ns, "web", clusters, nil, both)
	if agents.ran("member2", "nginx:bad") {
		t.Fatal("member2 received the halted revision")
	}
}
