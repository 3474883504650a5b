package execution

import (
	"context"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
)

func service(name string, selector map[string]any) map[string]any {
	spec := map[string]any{"ports": []any{map[string]any{"port": 80}}}
	if selector != nil {
		spec["selector"] = selector
	}
	return map[string]any{"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": name, "namespace": "default"}, "spec": spec}
}

// waitEndpoints waits until the Work's manifest ordinal reports want ready
// endpoints (-1: none reported).
func (r *raceEnv) waitEndpoints(t *testing.T, work string, ordinal int, want int32) {
	t.Helper()
	var got *int32
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		w, err := r.hub.WorkV1alpha1().Works(hubNamespace).Get(ctx, work, metav1.GetOptions{})
		if err != nil || len(w.Status.ManifestStatuses) <= ordinal {
			return false, nil
		}
		got = w.Status.ManifestStatuses[ordinal].ReadyEndpoints
		if want < 0 {
			return got == nil, nil
		}
		return got != nil && *got == want, nil
	})
	if err != nil {
		t.Fatalf("Work %s manifest %d: readyEndpoints %v, want %d", work, ordinal, ptr.Deref(got, -1), want)
	}
}

func (r *raceEnv) putSlice(t *testing.T, name, service string, family discoveryv1.AddressType, ready ...*bool) {
	t.Helper()
	s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default",
		Labels: map[string]string{discoveryv1.LabelServiceName: service}}, AddressType: family}
	for i, rd := range ready {
		addr := "10.1.0." + string(rune('1'+i))
		if family == discoveryv1.AddressTypeIPv6 {
			addr = "fd00::" + string(rune('1'+i))
		}
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: rd}})
	}
	ctx := context.Background()
	slices := r.env.Kube.DiscoveryV1().EndpointSlices("default")
	if cur, err := slices.Get(ctx, name, metav1.GetOptions{}); err == nil {
		s.ResourceVersion = cur.ResourceVersion
		if _, err := slices.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		return
	}
	if _, err := slices.Create(ctx, s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestReportsReadyEndpointsOfAppliedServices: the agent reports, in the
// Work's status, the ready endpoints of the Services it applied, counted
// from the member's EndpointSlices, and reports again when they change:
// the hub's traffic decision reads them.
func TestReportsReadyEndpointsOfAppliedServices(t *testing.T) {
	t.Parallel()
	r := startController(t)
	r.createWork(t, "web", nil, service("web", map[string]any{"app": "web"}), cm("web-config", "flotilla"),
		service("external", nil))
	r.waitEndpoints(t, "web", 0, 0)  // selects pods, none ready yet
	r.waitEndpoints(t, "web", 1, -1) // a ConfigMap has no endpoints
	r.waitEndpoints(t, "web", 2, -1) // no selector and no slices: cannot tell

	yes, no := ptr.To(true), ptr.To(false)
	r.putSlice(t, "web-abc", "web", discoveryv1.AddressTypeIPv4, yes, yes, no, nil) // unset ready counts as ready
	r.waitEndpoints(t, "web", 0, 3)
	r.putSlice(t, "web-v6", "web", discoveryv1.AddressTypeIPv6, yes, yes) // dual stack: the larger family
	r.waitEndpoints(t, "web", 0, 3)
	// Another Service's slices, even in the same namespace, change nothing.
	r.putSlice(t, "other-abc", "other", discoveryv1.AddressTypeIPv4, yes, yes, yes, yes, yes)

	// The backends go unready: the count drops to 0 without any Work change.
	r.putSlice(t, "web-abc", "web", discoveryv1.AddressTypeIPv4, no, no)
	r.putSlice(t, "web-v6", "web", discoveryv1.AddressTypeIPv6, no)
	r.waitEndpoints(t, "web", 0, 0)
	if err := r.env.Kube.DiscoveryV1().EndpointSlices("default").Delete(context.Background(), "web-v6", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	r.putSlice(t, "web-abc", "web", discoveryv1.AddressTypeIPv4, yes)
	r.waitEndpoints(t, "web", 0, 1)
}
