package detector

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/flotilla-io/flotilla/pkg/wrap"
)

// ReasonManifestScope: the template may not hold its object (a cluster-scoped
// kind or another namespace in a ResourceTemplate, a namespaced kind in a
// ClusterResourceTemplate). Nothing new is bound; an existing binding is kept
// as it was.
const ReasonManifestScope = "ManifestScopeRefused"

// ScopeFunc says whether a kind is namespaced; known is false when it cannot
// tell.
type ScopeFunc func(gvk schema.GroupVersionKind) (namespaced, known bool)

// scopeProblem says why a template of namespace templateNamespace ("" for a
// ClusterResourceTemplate) may not hold obj (whose namespace Object already
// defaulted to the template's), or "" when it may. The admission policy
// refuses the same at `kubectl apply`; this re-check holds when the policy
// was not installed, was installed after the template, or does not know the
// kind.
func scopeProblem(templateNamespace string, obj *unstructured.Unstructured, namespaced, known bool) string {
	what := obj.GetAPIVersion() + " " + obj.GetKind()
	if templateNamespace != "" {
		if ns := obj.GetNamespace(); ns != templateNamespace {
			return fmt.Sprintf("spec.manifest.metadata.namespace %q is not the template's namespace %q: a ResourceTemplate holds only objects of its own namespace",
				ns, templateNamespace)
		}
		if known && !namespaced {
			return fmt.Sprintf("spec.manifest.kind: %s is cluster-scoped; a ResourceTemplate holds only namespaced objects of its own namespace (cluster-scoped objects go in a ClusterResourceTemplate)", what)
		}
		return ""
	}
	if ns := obj.GetNamespace(); ns != "" {
		return fmt.Sprintf("spec.manifest.metadata.namespace %q: a ClusterResourceTemplate holds a cluster-scoped object, without a namespace", ns)
	}
	if known && namespaced {
		return fmt.Sprintf("spec.manifest.kind: %s is namespaced; a ClusterResourceTemplate holds only cluster-scoped objects (use a ResourceTemplate in the object's namespace)", what)
	}
	return ""
}

// HostScope answers from the host apiserver's discovery (cached; refreshed
// at most once per minRefresh when a kind is missing, so a CRD installed
// after the hub started is found), then from the well-known kinds `hub wrap`
// knows. A group whose discovery fails is simply not known: one broken
// aggregated API must not stop every template.
func HostScope(client discovery.CachedDiscoveryInterface, clk clock.Clock, minRefresh time.Duration) ScopeFunc {
	var mu sync.Mutex
	var lastRefresh time.Time
	lookup := func(gvk schema.GroupVersionKind) (namespaced, found bool) {
		list, err := client.ServerResourcesForGroupVersion(gvk.GroupVersion().String())
		if err != nil || list == nil {
			return false, false
		}
		for _, r := range list.APIResources {
			// A kind spelled in another case is the same kind to a
			// hostile eye; subresources share their parent's kind.
			if strings.EqualFold(r.Kind, gvk.Kind) && !strings.Contains(r.Name, "/") {
				return r.Namespaced, true
			}
		}
		return false, false
	}
	return func(gvk schema.GroupVersionKind) (bool, bool) {
		if namespaced, found := lookup(gvk); found {
			return namespaced, true
		}
		mu.Lock()
		refresh := clk.Since(lastRefresh) >= minRefresh
		if refresh {
			lastRefresh = clk.Now()
		}
		mu.Unlock()
		if refresh {
			klog.V(2).InfoS("Kind not served by the host; refreshing discovery", "kind", gvk)
			client.Invalidate()
			if namespaced, found := lookup(gvk); found {
				return namespaced, true
			}
		}
		return wrap.BuiltinScope(gvk)
	}
}
