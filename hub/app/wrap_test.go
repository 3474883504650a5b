package app

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/flotilla-io/flotilla/pkg/cmdutil"
)

const karmadaTestdata = "../../pkg/wrap/testdata/karmada"

// runHubWrap runs `hub <args>` as the binary would and returns stdout,
// stderr and the error that makes the exit code non-zero.
func runHubWrap(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	cmd := NewHubCommand()
	var stdout, stderr bytes.Buffer
	cmd.SetArgs(args)
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	err := cmd.Execute()
	return stdout.String(), stderr.String(), err
}

func TestWrapCommand(t *testing.T) {
	t.Run("native manifests", func(t *testing.T) {
		out, _, err := runHubWrap(t, "", "wrap", "-R", "-f", "../../e2e/testdata", "-n", "shop")
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"kind: ClusterResourceTemplate", "name: e2e-web-reader-clusterrole", "namespace: shop", "name: web-service"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q", want)
			}
		}
	})
	t.Run("stdin", func(t *testing.T) {
		out, _, err := runHubWrap(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {k: v}\n", "wrap", "-f", "-")
		if err != nil || !strings.Contains(out, "kind: ResourceTemplate") || !strings.Contains(out, "namespace: default") {
			t.Errorf("err %v, output\n%s", err, out)
		}
	})
	t.Run("bad input writes nothing", func(t *testing.T) {
		dir := t.TempDir()
		file := filepath.Join(dir, "app.yaml")
		data := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ok}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {labels: {a: b}}\n"
		if err := os.WriteFile(file, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		out, stderr, err := runHubWrap(t, "", "wrap", "-f", file)
		if err == nil || out != "" || !strings.Contains(err.Error(), file+", document 2: ConfigMap has no metadata.name") {
			t.Errorf("err %v, stdout %q", err, out)
		}
		if !strings.Contains(stderr, "document 2") {
			t.Errorf("stderr %q does not carry the error", stderr)
		}
	})
	t.Run("unsupported fields: reported, nothing written, non-zero", func(t *testing.T) {
		out, stderr, err := runHubWrap(t, "", "wrap", "--from-karmada", "-f", karmadaTestdata+"/unsupported.yaml")
		if err != errUnsupported || out != "" {
			t.Errorf("err %v, stdout %q", err, out)
		}
		for _, want := range []string{
			"unsupported: PropagationPolicy default/nginx: spec.placement.replicaScheduling.foo: not supported by Flotilla, dropped",
			"unsupported: FederatedHPA default/nginx (autoscaling.karmada.io/v1alpha1): kind not supported by Flotilla (no federated autoscaling), not emitted",
			"unsupported: PropagationPolicy default/nginx: spec.schedulerName: not supported by Flotilla (Flotilla has one scheduler, in the hub), dropped",
			"--allow-unsupported",
		} {
			if !strings.Contains(stderr, want) {
				t.Errorf("stderr lacks %q:\n%s", want, stderr)
			}
		}
	})
	t.Run("--allow-unsupported writes what converts", func(t *testing.T) {
		out, stderr, err := runHubWrap(t, "", "wrap", "--from-karmada", "--allow-unsupported", "-f", karmadaTestdata+"/unsupported.yaml")
		if err != nil || !strings.Contains(stderr, "spec.schedulerName: not supported by Flotilla") {
			t.Fatalf("err %v, stderr\n%s", err, stderr)
		}
		// spec.preemption converts (issue 31), with a note on Karmada's
		// feature gate.
		if !strings.Contains(stderr, "note: PropagationPolicy default/nginx: spec.preemption: Always takes effect in Flotilla") ||
			strings.Contains(stderr, "spec.preemption: not supported") || !strings.Contains(out, "preemption: Always") {
			t.Errorf("preemption: stderr\n%s\noutput\n%s", stderr, out)
		}
		if strings.Contains(out, "karmada.io/v1alpha1") || strings.Contains(out, "schedulerName") || strings.Contains(out, ".readyReplicas") ||
			strings.Count(out, "apiVersion: policy.flotilla.io/v1alpha1") != 2 || strings.Contains(out, "FederatedHPA") {
			t.Errorf("output\n%s", out)
		}
	})
	// Issue 18: what Karmada added since the seeds converts, with notes
	// and no report: propagateDeps, dependentOverrides, conflictResolution,
	// statePreservation (application and cluster), preConditions,
	// blockPredecessorSeconds, the purge modes of every release, and
	// WorkloadRebalancer.
	t.Run("issue 18 fields convert", func(t *testing.T) {
		args := []string{"wrap", "--from-karmada"}
		for _, f := range []string{"002-application-failover.yaml", "003-template-propagation-override.yaml", "issue18-stateful-failover.yaml",
			"issue18-karmada-v1.12.yaml", "issue18-propagate-deps.yaml", "issue18-workloadrebalancer.yaml"} {
			args = append(args, "-f", karmadaTestdata+"/"+f)
		}
		out, stderr, err := runHubWrap(t, "", args...)
		if err != nil || strings.Contains(stderr, "unsupported:") {
			t.Fatalf("err %v, stderr\n%s", err, stderr)
		}
		for _, want := range []string{"propagateDeps: true", "dependentOverrides:", "conflictResolution: Overwrite", "statePreservation:",
			"aliasLabelName: flink.example.io/checkpoint-path", "preConditions:", "delaySeconds: 5000", "blockPredecessorSeconds: 0",
			"apiVersion: apps.flotilla.io/v1alpha1\nkind: WorkloadRebalancer", "ttlSecondsAfterFinished: 60"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q", want)
			}
		}
		for _, unwanted := range []string{"karmada.io/v1alpha1", "Immediately", "Graciously", "association", "healthyState:\n        - Unhealthy", "observedWorkloads"} {
			if strings.Contains(out, unwanted) {
				t.Errorf("output has %q", unwanted)
			}
		}
		if !strings.Contains(stderr, "note: Deployment shop/web needs Secret web-db") {
			t.Errorf("stderr lacks the missing dependency:\n%s", stderr)
		}
	})
	t.Run("Karmada input without --from-karmada", func(t *testing.T) {
		out, _, err := runHubWrap(t, "", "wrap", "-f", karmadaTestdata+"/004-remedy.yaml")
		if err == nil || out != "" || !strings.Contains(err.Error(), "--from-karmada") {
			t.Errorf("err %v, stdout %q", err, out)
		}
	})
	t.Run("flag mistakes", func(t *testing.T) {
		if _, _, err := runHubWrap(t, "", "wrap"); err == nil || !strings.Contains(err.Error(), "no input") {
			t.Errorf("no -f: %v", err)
		}
		if _, _, err := runHubWrap(t, "", "wrap", "-f", "-", "--allow-unsupported"); err == nil {
			t.Error("--allow-unsupported without --from-karmada: no error")
		}
	})
}

// discoveryScope asks the kubeconfig's cluster; kinds it does not serve
// are left to the tables.
func TestWrapDiscoveryScope(t *testing.T) {
	resources := map[string]any{
		"/api":                  metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"}},
		"/api/v1":               metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList"}, GroupVersion: "v1", APIResources: []metav1.APIResource{{Name: "namespaces", Kind: "Namespace", Verbs: []string{"get"}}, {Name: "configmaps", Namespaced: true, Kind: "ConfigMap", Verbs: []string{"get"}}}},
		"/apis":                 metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList"}, Groups: []metav1.APIGroup{{Name: "example.com", Versions: []metav1.GroupVersionForDiscovery{{GroupVersion: "example.com/v1", Version: "v1"}}, PreferredVersion: metav1.GroupVersionForDiscovery{GroupVersion: "example.com/v1", Version: "v1"}}}},
		"/apis/example.com/v1":  metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList"}, GroupVersion: "example.com/v1", APIResources: []metav1.APIResource{{Name: "widgets", Kind: "Widget", Verbs: []string{"get"}}}},
		"/apis/example.com/v1/": nil,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := resources[r.URL.Path]
		if !ok || body == nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(body)
	}))
	defer srv.Close()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: srv.URL}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["members"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, kubeconfig); err != nil {
		t.Fatal(err)
	}

	scope, err := discoveryScope(cmdutil.KubeconfigFlags{Kubeconfig: kubeconfig, Context: "members"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		gvk               schema.GroupVersionKind
		namespaced, known bool
	}{
		{schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, false, true},
		{schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, true, true},
		{schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, false, false},
	} {
		ns, known := scope(c.gvk)
		if ns != c.namespaced || known != c.known {
			t.Errorf("%s: namespaced %v known %v", c.gvk, ns, known)
		}
	}

	// Through the command: the Widget becomes a ClusterResourceTemplate
	// without a note, a Gadget (unknown there too) a ResourceTemplate with one.
	in := "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n---\napiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g}\n"
	out, stderr, err := runHubWrap(t, in, "wrap", "-f", "-", "--kubeconfig", kubeconfig, "--context", "members")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "kind: ClusterResourceTemplate\nmetadata:\n  name: w\n") || !strings.Contains(out, "kind: ResourceTemplate\nmetadata:\n  name: g\n") ||
		strings.Contains(stderr, "Widget") || !strings.Contains(stderr, "Gadget.example.com: scope unknown") {
		t.Errorf("stdout\n%s\nstderr\n%s", out, stderr)
	}
	if _, _, err := runHubWrap(t, in, "wrap", "-f", "-", "--kubeconfig", filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("unreadable kubeconfig: no error")
	}
}

// --from-ocm and --from-kubefleet through the command: without the flag
// the objects are refused; with it what converts is written, and what does
// not is reported (nothing written, non-zero) unless --allow-unsupported.
func TestWrapCommandPeers(t *testing.T) {
	const testdata = "../../pkg/wrap/testdata/"
	t.Run("OCM without --from-ocm", func(t *testing.T) {
		out, _, err := runHubWrap(t, "", "wrap", "-f", testdata+"ocm/rollout-progressive.yaml")
		if err == nil || out != "" || !strings.Contains(err.Error(), "convert it with --from-ocm") {
			t.Errorf("err %v, stdout %q", err, out)
		}
	})
	t.Run("OCM converts", func(t *testing.T) {
		out, stderr, err := runHubWrap(t, "", "wrap", "--from-ocm", "-f", testdata+"ocm/rollout-per-group.yaml")
		if err != nil || strings.Contains(stderr, "unsupported:") {
			t.Fatalf("err %v, stderr\n%s", err, stderr)
		}
		for _, want := range []string{"kind: ClusterPropagationPolicy", "type: ProgressivePerGroup", "groupName: canary-west", "maxFailures: 10%",
			"preserveResourcesOnDeletion: true"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
		if !strings.Contains(stderr, "note: ManifestWorkReplicaSet default/payments: spec.placementRefs[0].rolloutStrategy.progressivePerGroup.mandatoryDecisionGroups: group(s) canary-west updated first") {
			t.Errorf("stderr\n%s", stderr)
		}
	})
	t.Run("KubeFleet unsupported: reported, nothing written", func(t *testing.T) {
		out, stderr, err := runHubWrap(t, "", "wrap", "--from-kubefleet", "-f", testdata+"kubefleet/examples.yaml")
		if err != errUnsupported || out != "" {
			t.Errorf("err %v, stdout %q", err, out)
		}
		for _, want := range []string{
			"unsupported: ClusterStagedUpdateStrategy example-strategy: spec.stages[1].sortingLabelKey: not converted: Flotilla updates a group's clusters in name order",
			"unsupported: ClusterResourcePlacement afd-crp: spec.strategy.rollingUpdate.maxSurge: not converted",
			"note: ClusterStagedUpdateStrategy example-strategy: spec.stages[0].afterStageTasks[0]: written as the rollout's minSuccessTime 1h0m0s",
		} {
			if !strings.Contains(stderr, want) {
				t.Errorf("stderr lacks %q:\n%s", want, stderr)
			}
		}
	})
	t.Run("KubeFleet --allow-unsupported", func(t *testing.T) {
		out, _, err := runHubWrap(t, "", "wrap", "--from-kubefleet", "--allow-unsupported", "-f", testdata+"kubefleet/examples.yaml")
		if err != nil || strings.Count(out, "kind: ClusterPropagationPolicy") != 2 || !strings.Contains(out, "approval: Required") ||
			strings.Contains(out, "kubernetes-fleet.io/v1beta1") {
			t.Errorf("err %v, output\n%s", err, out)
		}
	})
}
