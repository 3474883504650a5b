package execution

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// Refusal reasons: the label of flotilla_agent_manifests_refused_total and
// the detail of a Refused manifest in the Work's condition and event.
const (
	// RefusedClusterScopedKind: a namespaced source (a ResourceBinding)
	// carries a kind that is cluster-scoped on this member.
	RefusedClusterScopedKind = "ClusterScopedKind"
	// RefusedNamespaceNotOfSource: a namespaced source carries an object
	// of another namespace.
	RefusedNamespaceNotOfSource = "NamespaceNotOfSource"
	// RefusedProtectedNamespace: the object is in (or is the Namespace of)
	// a system namespace or the agent's own, and no flag allows it.
	RefusedProtectedNamespace = "ProtectedNamespace"
	// RefusedFlotillaKind: the object is one of Flotilla's own kinds
	// (API group flotilla.io or *.flotilla.io), and no flag allows it.
	RefusedFlotillaKind = "FlotillaKind"
)

// SystemNamespaces are refused as targets unless --allowed-system-namespaces
// names them; the agent's own (leader-election) namespace is added to them.
var SystemNamespaces = []string{metav1.NamespaceSystem, metav1.NamespacePublic, "kube-node-lease", "flotilla-system"}

// ProtectedNamespaces is SystemNamespaces plus the agent's own namespace.
func ProtectedNamespaces(agentNamespace string) []string {
	out := slices.Clone(SystemNamespaces)
	if agentNamespace != "" && !slices.Contains(out, agentNamespace) {
		out = append(out, agentNamespace)
	}
	return out
}

// admission is the agent's last check of a rendered manifest before it
// touches the member: the hub's own checks may have been bypassed (a bug, a
// hand-written Work, a compromised hub controller), the agent's are not.
type admission struct {
	protected          sets.Set[string]
	allowFlotillaKinds bool
}

func newAdmission(agentNamespace string, allowedSystemNamespaces []string, allowFlotillaKinds bool) admission {
	protected := sets.New(ProtectedNamespaces(agentNamespace)...)
	protected.Delete(allowedSystemNamespaces...)
	return admission{protected: protected, allowFlotillaKinds: allowFlotillaKinds}
}

// source is where a Work came from, as the hub recorded it in the Work's
// annotation (never as the manifest says).
type source struct {
	// namespace is the namespace of the ResourceBinding; "" for a
	// ClusterResourceBinding or a Work without the annotation.
	namespace string
}

// sourceOf reads the Work's source. A Work without the binding-namespace
// annotation was not rendered by the hub's binding controller but written by
// someone allowed to write Works (an admin: agents cannot create Works), so
// it counts as a cluster-scoped source.
func sourceOf(work *workv1alpha1.Work) source {
	return source{namespace: work.Annotations[workobjects.AnnotationBindingNamespace]}
}

// defaultNamespace is the namespace of a namespaced object whose manifest
// names none: the source's namespace, "default" for a cluster-scoped source.
func (s source) defaultNamespace() string {
	if s.namespace != "" {
		return s.namespace
	}
	return metav1.NamespaceDefault
}

// admit decides whether the object gvk namespace/name (namespace already
// defaulted; "" for a cluster-scoped kind) may be applied for src. It returns
// the refusal reason and a message, or "" when the object is admitted.
func (a admission) admit(src source, gvk schema.GroupVersionKind, namespaced bool, namespace, name string) (string, error) {
	if src.namespace != "" {
		if !namespaced {
			return RefusedClusterScopedKind, fmt.Errorf("refused: %s is cluster-scoped on this member and the Work's source is namespace %s (cluster-scoped kinds come only from a ClusterResourceTemplate)", gvk.Kind, src.namespace)
		}
		if namespace != src.namespace {
			return RefusedNamespaceNotOfSource, fmt.Errorf("refused: namespace %s is not the Work's source namespace %s", namespace, src.namespace)
		}
	}
	if namespaced && a.protected.Has(namespace) {
		return RefusedProtectedNamespace, fmt.Errorf("refused: namespace %s is protected (the agent flag --allowed-system-namespaces can allow it)", namespace)
	}
	if gvk.Group == "" && gvk.Kind == "Namespace" && a.protected.Has(name) {
		return RefusedProtectedNamespace, fmt.Errorf("refused: Namespace %s is protected (the agent flag --allowed-system-namespaces can allow it)", name)
	}
	if !a.allowFlotillaKinds && isFlotillaGroup(gvk.Group) {
		return RefusedFlotillaKind, fmt.Errorf("refused: %s is a Flotilla kind (the agent flag --allow-flotilla-kinds can allow it)", gvk.GroupKind())
	}
	return "", nil
}

func isFlotillaGroup(group string) bool {
	group = strings.ToLower(group)
	return group == "flotilla.io" || strings.HasSuffix(group, ".flotilla.io")
}
