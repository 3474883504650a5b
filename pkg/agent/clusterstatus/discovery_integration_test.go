package clusterstatus

import (
	"context"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/testenv"
)

// testDiscoveryCacheRealAPIServer: against a real kube-apiserver, the
// leader's API enablements are discovered in full once, then reused while
// the aggregated discovery documents keep their ETags (304), and discovered
// again as soon as a new CRD changes them. (Run from TestProbeRealAPIServer,
// sharing its apiserver.)
func testDiscoveryCacheRealAPIServer(t *testing.T, env *testenv.Env) {
	kube, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	d := &countingDiscovery{DiscoveryInterface: kube.Discovery()}
	var c apiCache
	first, reused, err := c.discoverAPIs(t.Context(), d)
	if err != nil || len(first) == 0 || reused {
		t.Fatalf("first discovery: %d groups, err %v", len(first), err)
	}
	if !c.etags.Complete() {
		t.Fatalf("kube-apiserver's aggregated discovery sent no ETags: %q", c.etags)
	}
	again, reused, err := c.discoverAPIs(t.Context(), d)
	if err != nil || d.full.Load() != 1 || !reused || !slices.EqualFunc(first, again, func(a, b clusterv1alpha1.APIEnablement) bool { return a.GroupVersion == b.GroupVersion }) {
		t.Fatalf("unchanged documents: %d full discoveries (want 1), err %v", d.full.Load(), err)
	}

	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "gadgets.etag.example.com"},
		"spec": map[string]any{
			"group": "etag.example.com", "scope": "Namespaced",
			"names": map[string]any{"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList"},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
		},
	}}
	if err := env.CreateObjects(t.Context(), crd); err != nil {
		t.Fatal(err)
	}
	// The CRD reaches discovery asynchronously: poll until it shows, and
	// until the documents settle again (a call that reuses the cache).
	err = wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		apis, _, err := c.discoverAPIs(t.Context(), d)
		return err == nil && slices.ContainsFunc(apis, func(e clusterv1alpha1.APIEnablement) bool { return e.GroupVersion == "etag.example.com/v1" }), nil
	})
	if err != nil {
		t.Fatalf("etag.example.com/v1 not in the API enablements after %d full discoveries: %v", d.full.Load(), err)
	}
	if d.full.Load() < 2 {
		t.Fatalf("the new CRD was seen without a full discovery")
	}
	err = wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		before := d.full.Load()
		_, reused, err := c.discoverAPIs(t.Context(), d)
		return err == nil && reused && d.full.Load() == before, nil
	})
	if err != nil {
		t.Fatalf("the cache is not reused once the documents settle: %v", err)
	}
}
