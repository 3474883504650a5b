package ingress

import (
	"fmt"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

func template(ns, name, manifest string) *workv1alpha1.ResourceTemplate {
	return &workv1alpha1.ResourceTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + ns + "-" + name)},
		Spec:       workv1alpha1.ResourceTemplateSpec{Manifest: workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: []byte(manifest)}}},
	}
}

func serviceManifest(name, selector string) string {
	return fmt.Sprintf(`{"apiVersion":"v1","kind":"Service","metadata":{"name":%q},"spec":{"selector":%s,"ports":[{"port":80}]}}`, name, selector)
}

func workloadManifest(apiVersion, kind, name, podLabels string) string {
	return fmt.Sprintf(`{"apiVersion":%q,"kind":%q,"metadata":{"name":%q},"spec":{"selector":{"matchLabels":%s},"template":{"metadata":{"labels":%s}}}}`,
		apiVersion, kind, name, podLabels, podLabels)
}

// boundBy is the binding the detector makes for tmpl.
func boundBy(tmpl *workv1alpha1.ResourceTemplate, apiVersion, kind, name string) *workv1alpha1.ResourceBinding {
	return &workv1alpha1.ResourceBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: tmpl.Namespace, Name: workobjects.BindingName(kind, name),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(tmpl, workv1alpha1.SchemeGroupVersion.WithKind("ResourceTemplate"))}},
		Spec: workv1alpha1.ResourceBindingSpec{Resource: workv1alpha1.ObjectReference{APIVersion: apiVersion, Kind: kind, Namespace: tmpl.Namespace, Name: name, UID: tmpl.UID}},
	}
}

func indexers(t *testing.T, objs ...any) (templates, bindings cache.Indexer) {
	t.Helper()
	templates = cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{podLabelIndex: podLabelIndexFunc, serviceSelectorIndex: serviceSelectorIndexFunc})
	bindings = cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{workobjects.OwnerTemplateIndex: workobjects.OwnerTemplateKey})
	for _, o := range objs {
		var err error
		switch o.(type) {
		case *workv1alpha1.ResourceTemplate:
			err = templates.Add(o)
		case *workv1alpha1.ResourceBinding:
			err = bindings.Add(o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return templates, bindings
}

func bindingNames(rbs []*workv1alpha1.ResourceBinding) []string {
	var out []string
	for _, rb := range rbs {
		out = append(out, rb.Name)
	}
	return out
}

// TestWorkloadBindings: a backend Service's workloads are the Deployment,
// StatefulSet, DaemonSet and ReplicaSet templates of the ingress's
// namespace whose pod template labels its selector matches (every selector
// label, extra pod labels allowed); never another namespace's, never other
// kinds, never through a Service without selector, never a binding whose
// controlling template is not the matched one.
func TestWorkloadBindings(t *testing.T) {
	svc := template("shop", "web-svc", serviceManifest("web", `{"app":"web","tier":"front"}`))
	noSelector := template("shop", "manual-svc", `{"apiVersion":"v1","kind":"Service","metadata":{"name":"manual"},"spec":{"ports":[{"port":80}]}}`)
	deploy := template("shop", "web", workloadManifest("apps/v1", "Deployment", "web", `{"app":"web","tier":"front","version":"v2"}`))
	sts := template("shop", "web-db", workloadManifest("apps/v1", "StatefulSet", "web-db", `{"app":"web","tier":"front"}`))
	ds := template("shop", "web-agent", workloadManifest("apps/v1", "DaemonSet", "web-agent", `{"app":"web","tier":"front"}`))
	rs := template("shop", "web-rs", workloadManifest("apps/v1", "ReplicaSet", "web-rs", `{"app":"web","tier":"front"}`))
	partial := template("shop", "web-back", workloadManifest("apps/v1", "Deployment", "web-back", `{"app":"web","tier":"back"}`))
	pod := template("shop", "web-pod", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-pod","labels":{"app":"web","tier":"front"}},"spec":{}}`)
	job := template("shop", "web-job", workloadManifest("batch/v1", "Job", "web-job", `{"app":"web","tier":"front"}`))
	// Another tenant with the same labels and names.
	otherSvc := template("rival", "web-svc", serviceManifest("web", `{"app":"web","tier":"front"}`))
	otherDeploy := template("rival", "web", workloadManifest("apps/v1", "Deployment", "web", `{"app":"web","tier":"front"}`))
	// A manifest naming another namespace than its template's.
	smuggled := template("shop", "smuggled", `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"x","namespace":"rival"},"spec":{"template":{"metadata":{"labels":{"app":"web","tier":"front"}}}}}`)

	svcRB := boundBy(svc, "v1", "Service", "web")
	manualRB := boundBy(noSelector, "v1", "Service", "manual")
	deployRB := boundBy(deploy, "apps/v1", "Deployment", "web")
	stsRB := boundBy(sts, "apps/v1", "StatefulSet", "web-db")
	dsRB := boundBy(ds, "apps/v1", "DaemonSet", "web-agent")
	rsRB := boundBy(rs, "apps/v1", "ReplicaSet", "web-rs")
	partialRB := boundBy(partial, "apps/v1", "Deployment", "web-back")
	podRB := boundBy(pod, "v1", "Pod", "web-pod")
	jobRB := boundBy(job, "batch/v1", "Job", "web-job")
	otherDeployRB := boundBy(otherDeploy, "apps/v1", "Deployment", "web")
	smuggledRB := boundBy(smuggled, "apps/v1", "Deployment", "x")
	// A binding named like a match but controlled by a template that no
	// longer exists (re-created under the name: another UID).
	stale := boundBy(template("shop", "web", "{}"), "apps/v1", "Deployment", "web")
	stale.Name, stale.OwnerReferences[0].UID = "deployment-web-stale", "old-uid"

	templates, bindings := indexers(t, svc, noSelector, deploy, sts, ds, rs, partial, pod, job, otherSvc, otherDeploy, smuggled,
		svcRB, manualRB, deployRB, stsRB, dsRB, rsRB, partialRB, podRB, jobRB, otherDeployRB, smuggledRB, stale)

	got := WorkloadBindings(templates, bindings, "shop", map[string][]*workv1alpha1.ResourceBinding{"web": {svcRB}, "manual": {manualRB}})
	want := []string{dsRB.Name, rsRB.Name, stsRB.Name, deployRB.Name}
	slices.Sort(want)
	if names := bindingNames(got["web"]); !slices.Equal(names, want) {
		t.Errorf("workloads of shop/web = %v, want %v", names, want)
	}
	if len(got["manual"]) != 0 {
		t.Errorf("a Service without selector fronts no workload, got %v", bindingNames(got["manual"]))
	}

	// The rival tenant's ingress sees its own Deployment only.
	otherSvcRB := boundBy(otherSvc, "v1", "Service", "web")
	if err := bindings.Add(otherSvcRB); err != nil {
		t.Fatal(err)
	}
	got = WorkloadBindings(templates, bindings, "rival", map[string][]*workv1alpha1.ResourceBinding{"web": {otherSvcRB}})
	if names := bindingNames(got["web"]); !slices.Equal(names, []string{otherDeployRB.Name}) {
		t.Errorf("workloads of rival/web = %v, want only rival's Deployment", names)
	}
	// A Service binding of another namespace handed in (it never is) finds
	// nothing: its template is looked up in its own namespace, the
	// workloads in the ingress's.
	got = WorkloadBindings(templates, bindings, "shop", map[string][]*workv1alpha1.ResourceBinding{"web": {otherSvcRB}})
	for _, rb := range got["web"] {
		if rb.Namespace != "shop" {
			t.Errorf("shop's ingress read %s/%s", rb.Namespace, rb.Name)
		}
	}

	// The reverse direction, used to queue ingresses on a workload event.
	if svcs := SelectingServices(templates, "shop", map[string]string{"app": "web", "tier": "front", "version": "v2"}); !slices.Equal(svcs, []string{"web"}) {
		t.Errorf("Services selecting the Deployment's pods = %v, want [web]", svcs)
	}
	if svcs := SelectingServices(templates, "shop", map[string]string{"app": "web"}); len(svcs) != 0 {
		t.Errorf("a pod without tier=front is selected by %v", svcs)
	}

	// Labels changed: the index follows the template.
	moved := deploy.DeepCopy()
	moved.Spec.Manifest.Raw = []byte(workloadManifest("apps/v1", "Deployment", "web", `{"app":"web","tier":"canary"}`))
	if err := templates.Update(moved); err != nil {
		t.Fatal(err)
	}
	got = WorkloadBindings(templates, bindings, "shop", map[string][]*workv1alpha1.ResourceBinding{"web": {svcRB}})
	if slices.Contains(bindingNames(got["web"]), deployRB.Name) {
		t.Errorf("a Deployment whose pods no longer match is still behind the Service")
	}
}

func TestSelects(t *testing.T) {
	for _, tc := range []struct {
		sel, labels map[string]string
		want        bool
	}{
		{nil, map[string]string{"a": "1"}, false},
		{map[string]string{"a": "1"}, nil, false},
		{map[string]string{"a": "1"}, map[string]string{"a": "1", "b": "2"}, true},
		{map[string]string{"a": "1", "b": "2"}, map[string]string{"a": "1"}, false},
		{map[string]string{"a": "1"}, map[string]string{"a": "2"}, false},
		{map[string]string{"a": ""}, map[string]string{"a": ""}, true},
	} {
		if got := Selects(tc.sel, tc.labels); got != tc.want {
			t.Errorf("Selects(%v, %v) = %v, want %v", tc.sel, tc.labels, got, tc.want)
		}
	}
}

// BenchmarkWorkloadBindings: one ingress's lookup of the workloads behind
// its Service among 10,000 workload templates (100 namespaces of 100, all
// labelled app=web in their namespace but with their own name label), as
// each sync makes it.
func BenchmarkWorkloadBindings(b *testing.B) {
	templates := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{podLabelIndex: podLabelIndexFunc, serviceSelectorIndex: serviceSelectorIndexFunc})
	bindings := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{workobjects.OwnerTemplateIndex: workobjects.OwnerTemplateKey})
	var svcRB *workv1alpha1.ResourceBinding
	for n := range 100 {
		ns := fmt.Sprintf("ns%d", n)
		svc := template(ns, "web-svc", serviceManifest("web", `{"app":"web","name":"w7"}`))
		rb := boundBy(svc, "v1", "Service", "web")
		_ = templates.Add(svc)
		_ = bindings.Add(rb)
		if n == 0 {
			svcRB = rb
		}
		for i := range 100 {
			name := fmt.Sprintf("w%d", i)
			d := template(ns, name, workloadManifest("apps/v1", "Deployment", name, fmt.Sprintf(`{"app":"web","name":%q}`, name)))
			_ = templates.Add(d)
			_ = bindings.Add(boundBy(d, "apps/v1", "Deployment", name))
		}
	}
	services := map[string][]*workv1alpha1.ResourceBinding{"web": {svcRB}}
	b.ResetTimer()
	for b.Loop() {
		if got := WorkloadBindings(templates, bindings, "ns0", services); len(got["web"]) != 1 {
			b.Fatalf("got %d workloads", len(got["web"]))
		}
	}
}
