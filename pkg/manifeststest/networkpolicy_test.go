package manifeststest

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

// hubStrictNetworkKustomization is the example that narrows who reaches the
// webhook and /metrics (docs/install.md, "Who can reach the webhook").
const hubStrictNetworkKustomization = "kustomize/hub-strict-network"

// The hub's pods are selected by a NetworkPolicy in every shipped
// kustomization: each port the hub serves is opened by a rule (a policy that
// missed one would break the webhook, /metrics or DNS where the network
// plugin enforces it), the health port only from the node (the kubelet: no
// rule), no rule names a port the pod does not declare (it would open
// nothing), and egress is left alone.
func TestHubNetworkPolicyOpensWhatTheHubServes(t *testing.T) {
	for _, dir := range []string{hubKustomization, hubDNSKustomization, hubDNSEndpointKustomization, hubStrictNetworkKustomization} {
		t.Run(dir, func(t *testing.T) {
			objs := render(t, dir)
			d := &appsv1.Deployment{}
			get(t, objs, "Deployment", hubDeploymentName, d)
			c := onlyContainer(t, &d.Spec.Template.Spec)
			policies := selecting(t, objs, d.Namespace, d.Spec.Template.Labels)
			if len(policies) == 0 {
				t.Fatalf("no NetworkPolicy selects the hub's pods")
			}
			for _, p := range policies {
				for _, pt := range p.Spec.PolicyTypes {
					if pt == networkingv1.PolicyTypeEgress {
						t.Errorf("NetworkPolicy %s restricts egress: the hub's connections to apiservers are not its business", p.Name)
					}
				}
				for _, r := range p.Spec.Ingress {
					if len(r.Ports) == 0 {
						t.Errorf("NetworkPolicy %s opens every port", p.Name)
					}
					for _, rp := range r.Ports {
						if declared(c, rp) == nil {
							t.Errorf("NetworkPolicy %s names port %v/%v, which the hub's container does not declare", p.Name, rp.Port, rp.Protocol)
						}
					}
				}
			}
			for _, cp := range c.Ports {
				rules := opening(policies, cp)
				switch cp.Name {
				case "health":
					if len(rules) > 0 {
						t.Errorf("the health port is opened: only the kubelet probes it, from the node, always allowed")
					}
				default:
					if len(rules) == 0 {
						t.Errorf("no NetworkPolicy rule opens the hub's port %s (%d/%s)", cp.Name, cp.ContainerPort, cp.Protocol)
					}
				}
				if dir == hubStrictNetworkKustomization && (cp.Name == "webhook" || cp.Name == "metrics") {
					for _, r := range rules {
						if openToAll(r) {
							t.Errorf("the strict example opens %s to any source: %+v", cp.Name, r.From)
						}
					}
				}
			}
		})
	}
}

// selecting is the NetworkPolicies of namespace that select pods labelled
// podLabels.
func selecting(t *testing.T, objs []*unstructured.Unstructured, namespace string, podLabels map[string]string) []*networkingv1.NetworkPolicy {
	t.Helper()
	var out []*networkingv1.NetworkPolicy
	for _, o := range objs {
		if o.GetKind() != "NetworkPolicy" {
			continue
		}
		p := &networkingv1.NetworkPolicy{}
		convert(t, o, p)
		if p.Namespace != namespace {
			t.Errorf("NetworkPolicy %s/%s is not in the hub's namespace %s", p.Namespace, p.Name, namespace)
			continue
		}
		if len(p.Spec.PodSelector.MatchExpressions) > 0 {
			t.Fatalf("NetworkPolicy %s: this test reads matchLabels only", p.Name)
		}
		if labels.SelectorFromSet(p.Spec.PodSelector.MatchLabels).Matches(labels.Set(podLabels)) {
			out = append(out, p)
		}
	}
	return out
}

// declared is the container port rp names (by name or number), nil if
// none.
func declared(c *corev1.Container, rp networkingv1.NetworkPolicyPort) *corev1.ContainerPort {
	for i := range c.Ports {
		if matches(rp, c.Ports[i]) {
			return &c.Ports[i]
		}
	}
	return nil
}

func matches(rp networkingv1.NetworkPolicyPort, cp corev1.ContainerPort) bool {
	protocol := corev1.ProtocolTCP
	if rp.Protocol != nil {
		protocol = *rp.Protocol
	}
	cpProtocol := cp.Protocol
	if cpProtocol == "" {
		cpProtocol = corev1.ProtocolTCP
	}
	if protocol != cpProtocol || rp.Port == nil {
		return protocol == cpProtocol
	}
	if rp.Port.StrVal != "" {
		return rp.Port.StrVal == cp.Name
	}
	return rp.Port.IntVal == cp.ContainerPort
}

// opening is the ingress rules of policies that open cp.
func opening(policies []*networkingv1.NetworkPolicy, cp corev1.ContainerPort) []networkingv1.NetworkPolicyIngressRule {
	var out []networkingv1.NetworkPolicyIngressRule
	for _, p := range policies {
		for _, r := range p.Spec.Ingress {
			for _, rp := range r.Ports {
				if matches(rp, cp) {
					out = append(out, r)
					break
				}
			}
		}
	}
	return out
}

// openToAll: r admits any source (no peer, an empty selector, or a
// default route).
func openToAll(r networkingv1.NetworkPolicyIngressRule) bool {
	if len(r.From) == 0 {
		return true
	}
	for _, peer := range r.From {
		if peer.IPBlock != nil && (peer.IPBlock.CIDR == "0.0.0.0/0" || peer.IPBlock.CIDR == "::/0") {
			return true
		}
		if peer.NamespaceSelector != nil && len(peer.NamespaceSelector.MatchLabels)+len(peer.NamespaceSelector.MatchExpressions) == 0 &&
			(peer.PodSelector == nil || len(peer.PodSelector.MatchLabels)+len(peer.PodSelector.MatchExpressions) == 0) {
			return true
		}
	}
	return false
}
