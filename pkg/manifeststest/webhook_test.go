package manifeststest

import (
	"slices"
	"strconv"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-io/flotilla/pkg/hub/admission"
)

// The ResourceInterpreterCustomization webhook as shipped: the Deployment
// serves it (--webhook-port) behind the Service the certificate is for
// (--webhook-service-name/-namespace), the configuration the hub patches
// (--webhook-configuration-name) calls that Service on the handler's path,
// matches customizations only (create and update), and the hub's roles let
// it keep its Secret and that configuration's caBundle, by name.
func TestHubWebhookIsWiredAndScoped(t *testing.T) {
	objs := render(t, hubKustomization)
	d := &appsv1.Deployment{}
	get(t, objs, "Deployment", hubDeploymentName, d)
	c := onlyContainer(t, &d.Spec.Template.Spec)
	flags := checkContainer(t, hub, c, d.Namespace)
	value := func(name string) string { return flags.Lookup(name).Value.String() }
	port, err := strconv.Atoi(value("webhook-port"))
	if err != nil || port == 0 {
		t.Fatalf("the hub Deployment does not serve the webhook: --webhook-port=%s", value("webhook-port"))
	}
	if value("webhook-cert-dir") != "" {
		t.Errorf("--webhook-cert-dir is set: the shipped hub keeps its own certificate")
	}
	svcName, ns := value("webhook-service-name"), value("webhook-service-namespace")
	if ns != d.Namespace {
		t.Errorf("--webhook-service-namespace=%s, want the Deployment's namespace %s", ns, d.Namespace)
	}
	checkServicePort(t, objs, svcName, d.Spec.Template.Labels, c, int32(port))

	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	get(t, objs, "ValidatingWebhookConfiguration", value("webhook-configuration-name"), vwc)
	if len(vwc.Webhooks) != 1 {
		t.Fatalf("%d webhooks, want 1", len(vwc.Webhooks))
	}
	wh := vwc.Webhooks[0]
	ref := wh.ClientConfig.Service
	if ref == nil || ref.Name != svcName || ref.Namespace != ns || ref.Path == nil || *ref.Path != admission.ValidatePath || wh.ClientConfig.URL != nil {
		t.Errorf("clientConfig %+v, want Service %s/%s path %s", wh.ClientConfig, ns, svcName, admission.ValidatePath)
	}
	if len(wh.ClientConfig.CABundle) != 0 {
		t.Error("the manifest sets caBundle, which the hub owns (an apply would put a stale CA back)")
	}
	if wh.FailurePolicy == nil || *wh.FailurePolicy != admissionregistrationv1.Fail || wh.SideEffects == nil ||
		*wh.SideEffects != admissionregistrationv1.SideEffectClassNone || wh.TimeoutSeconds == nil || *wh.TimeoutSeconds > 10 {
		t.Errorf("failurePolicy %v, sideEffects %v, timeoutSeconds %v: want Fail, None, at most 10", wh.FailurePolicy, wh.SideEffects, wh.TimeoutSeconds)
	}
	if wh.NamespaceSelector != nil || wh.ObjectSelector != nil {
		t.Error("selectors on a cluster-scoped kind's webhook")
	}
	if len(wh.Rules) != 1 || !slices.Equal(wh.Rules[0].APIGroups, []string{"config.flotilla.io"}) ||
		!slices.Equal(wh.Rules[0].Resources, []string{"resourceinterpretercustomizations"}) ||
		!slices.Equal(wh.Rules[0].Operations, []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}) {
		t.Errorf("rules %+v, want config.flotilla.io resourceinterpretercustomizations CREATE/UPDATE only", wh.Rules)
	}

	// RBAC: the Secret and the configuration, each by name.
	var rules []rbacv1.PolicyRule
	for _, o := range objs {
		switch o.GetKind() {
		case "ClusterRole":
			r := &rbacv1.ClusterRole{}
			convert(t, o, r)
			rules = append(rules, r.Rules...)
		case "Role":
			if o.GetNamespace() != ns {
				continue
			}
			r := &rbacv1.Role{}
			convert(t, o, r)
			rules = append(rules, r.Rules...)
		}
	}
	for _, want := range []struct{ group, resource, name, verb string }{
		{"", "secrets", value("webhook-secret-name"), "get"},
		{"", "secrets", value("webhook-secret-name"), "list"},
		{"", "secrets", value("webhook-secret-name"), "watch"},
		{"", "secrets", value("webhook-secret-name"), "update"},
		{"", "secrets", "", "create"},
		{"admissionregistration.k8s.io", "validatingwebhookconfigurations", vwc.Name, "get"},
		{"admissionregistration.k8s.io", "validatingwebhookconfigurations", vwc.Name, "list"},
		{"admissionregistration.k8s.io", "validatingwebhookconfigurations", vwc.Name, "watch"},
		{"admissionregistration.k8s.io", "validatingwebhookconfigurations", vwc.Name, "patch"},
	} {
		if !slices.ContainsFunc(rules, func(r rbacv1.PolicyRule) bool {
			return slices.Contains(r.APIGroups, want.group) && slices.Contains(r.Resources, want.resource) && slices.Contains(r.Verbs, want.verb) &&
				(want.name == "" || slices.Contains(r.ResourceNames, want.name))
		}) {
			t.Errorf("no rule lets the hub %s %s %q", want.verb, want.resource, want.name)
		}
	}
	for _, r := range rules {
		if (slices.Contains(r.Resources, "secrets") || slices.Contains(r.Resources, "validatingwebhookconfigurations")) &&
			len(r.ResourceNames) == 0 && !slices.Equal(r.Verbs, []string{"create"}) {
			t.Errorf("rule %+v reaches secrets or webhook configurations beyond the hub's own by name", r)
		}
	}
}

// checkServicePort: the Service selects the pods and targets port.
func checkServicePort(t *testing.T, objs []*unstructured.Unstructured, name string, podLabels map[string]string, c *corev1.Container, port int32) {
	t.Helper()
	svc := &corev1.Service{}
	get(t, objs, "Service", name, svc)
	for k, v := range svc.Spec.Selector {
		if podLabels[k] != v {
			t.Errorf("Service %s selects %s=%s, which the pods do not carry", name, k, v)
		}
	}
	if len(svc.Spec.Ports) != 1 {
		t.Fatalf("Service %s: %d ports, want 1", name, len(svc.Spec.Ports))
	}
	if got := containerPort(t, c, svc.Spec.Ports[0].TargetPort, corev1.ProtocolTCP); got != port {
		t.Errorf("Service %s targets container port %d, but --webhook-port=%d", name, got, port)
	}
}
