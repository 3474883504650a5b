package wrap

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ScopeFunc says whether a kind is namespaced. known is false when the
// function cannot tell (e.g. discovery does not serve the kind), so the
// caller falls back to the next source.
type ScopeFunc func(gvk schema.GroupVersionKind) (namespaced, known bool)

// clusterScoped lists well-known cluster-scoped kinds by group and kind.
// The version does not matter: scope is a property of the resource, not of
// one version of it. It covers the built-in APIs and the add-ons most
// manifests carry, so that wrapping works offline (without --kubeconfig).
var clusterScoped = groupKinds(
	// core
	"Namespace", "Node", "PersistentVolume", "ComponentStatus",
	// rbac
	"ClusterRole.rbac.authorization.k8s.io", "ClusterRoleBinding.rbac.authorization.k8s.io",
	// apiextensions, apiregistration
	"CustomResourceDefinition.apiextensions.k8s.io", "APIService.apiregistration.k8s.io",
	// admission
	"ValidatingWebhookConfiguration.admissionregistration.k8s.io",
	"MutatingWebhookConfiguration.admissionregistration.k8s.io",
	"ValidatingAdmissionPolicy.admissionregistration.k8s.io",
	"ValidatingAdmissionPolicyBinding.admissionregistration.k8s.io",
	"MutatingAdmissionPolicy.admissionregistration.k8s.io",
	"MutatingAdmissionPolicyBinding.admissionregistration.k8s.io",
	// storage
	"StorageClass.storage.k8s.io", "CSIDriver.storage.k8s.io", "CSINode.storage.k8s.io",
	"VolumeAttachment.storage.k8s.io", "VolumeAttributesClass.storage.k8s.io",
	"VolumeSnapshotClass.snapshot.storage.k8s.io", "VolumeSnapshotContent.snapshot.storage.k8s.io",
	// scheduling, node, networking
	"PriorityClass.scheduling.k8s.io", "RuntimeClass.node.k8s.io",
	"IngressClass.networking.k8s.io", "IPAddress.networking.k8s.io", "ServiceCIDR.networking.k8s.io",
	// flow control, certificates, resource
	"FlowSchema.flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration.flowcontrol.apiserver.k8s.io",
	"CertificateSigningRequest.certificates.k8s.io", "ClusterTrustBundle.certificates.k8s.io",
	"DeviceClass.resource.k8s.io", "ResourceSlice.resource.k8s.io",
	// common add-ons
	"GatewayClass.gateway.networking.k8s.io",
	"ClusterIssuer.cert-manager.io",
)

// namespaced lists well-known namespaced kinds. Kinds in neither table are
// assumed namespaced too, but with a note, so a wrong guess is visible.
var namespaced = groupKinds(
	// core
	"Pod", "Service", "ConfigMap", "Secret", "ServiceAccount", "PersistentVolumeClaim",
	"Endpoints", "LimitRange", "ResourceQuota", "ReplicationController", "PodTemplate", "Event",
	// apps, batch, autoscaling, policy
	"Deployment.apps", "StatefulSet.apps", "DaemonSet.apps", "ReplicaSet.apps", "ControllerRevision.apps",
	"Job.batch", "CronJob.batch",
	"HorizontalPodAutoscaler.autoscaling", "PodDisruptionBudget.policy",
	// rbac, networking, discovery, coordination, events, storage
	"Role.rbac.authorization.k8s.io", "RoleBinding.rbac.authorization.k8s.io",
	"Ingress.networking.k8s.io", "NetworkPolicy.networking.k8s.io",
	"EndpointSlice.discovery.k8s.io", "Lease.coordination.k8s.io", "Event.events.k8s.io",
	"CSIStorageCapacity.storage.k8s.io", "VolumeSnapshot.snapshot.storage.k8s.io",
	"ResourceClaim.resource.k8s.io", "ResourceClaimTemplate.resource.k8s.io",
	// common add-ons
	"Gateway.gateway.networking.k8s.io", "HTTPRoute.gateway.networking.k8s.io",
	"GRPCRoute.gateway.networking.k8s.io", "ReferenceGrant.gateway.networking.k8s.io",
	"Certificate.cert-manager.io", "Issuer.cert-manager.io",
	"ServiceMonitor.monitoring.coreos.com", "PodMonitor.monitoring.coreos.com", "PrometheusRule.monitoring.coreos.com",
)

func groupKinds(names ...string) map[schema.GroupKind]bool {
	m := make(map[schema.GroupKind]bool, len(names))
	for _, n := range names {
		m[schema.ParseGroupKind(n)] = true
	}
	return m
}

// BuiltinScope answers from the built-in tables only.
func BuiltinScope(gvk schema.GroupVersionKind) (isNamespaced, known bool) {
	gk := gvk.GroupKind()
	switch {
	case clusterScoped[gk]:
		return false, true
	case namespaced[gk]:
		return true, true
	}
	return true, false
}

// ParseClusterScopedKinds parses --cluster-scoped-kind values, written
// Kind.group as kubectl writes resources ("Namespace" for the core group,
// "ClusterIssuer.cert-manager.io").
func ParseClusterScopedKinds(values []string) []schema.GroupKind {
	out := make([]schema.GroupKind, 0, len(values))
	for _, v := range values {
		out = append(out, schema.ParseGroupKind(v))
	}
	return out
}
