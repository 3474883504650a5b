package render

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-io/flotilla/pkg/overrides"
)

// IdentityError: the overrides of one cluster changed what object the Work
// would hold (apiVersion, kind, namespace, name or generateName). The
// OverridePolicy CRDs refuse such paths, but a policy stored before that
// rule existed (or with the CRD replaced) is never re-validated, so the hub
// checks what it is about to write.
type IdentityError struct {
	changes   []string
	overrides []string
}

func (e *IdentityError) Error() string {
	return fmt.Sprintf("the overrides change the object's identity (%s); no Work is written for this cluster until %s is fixed",
		strings.Join(e.changes, ", "), strings.Join(e.overrides, "; "))
}

// identityChanges lists how rendered differs from the template's object in
// apiVersion, kind, namespace or name; none when the identity is kept.
func identityChanges(template, rendered *unstructured.Unstructured) []string {
	var changes []string
	for _, f := range []struct{ field, was, is string }{
		{"apiVersion", template.GetAPIVersion(), rendered.GetAPIVersion()},
		{"kind", template.GetKind(), rendered.GetKind()},
		{"metadata.namespace", template.GetNamespace(), rendered.GetNamespace()},
		{"metadata.name", template.GetName(), rendered.GetName()},
		// generateName would let the member pick a new name on every create.
		{"metadata.generateName", template.GetGenerateName(), rendered.GetGenerateName()},
	} {
		if f.was != f.is {
			changes = append(changes, fmt.Sprintf("%s %q -> %q", f.field, f.was, f.is))
		}
	}
	return changes
}

// identityPath reports whether a JSON pointer reaches the object's identity,
// as the CRD rule on plaintext paths does.
func identityPath(path string) bool {
	for _, p := range []string{"/apiVersion", "/kind", "/metadata/name", "/metadata/namespace", "/metadata/generateName"} {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return path == "/metadata" || path == "/metadata/"
}

// culprits names the overriders that could have changed the identity: the
// plaintext paths and image predicates into it, or, when none does (the
// change came some other way), every policy that applied.
func culprits(applied *overrides.AppliedOverrides) []string {
	if applied == nil {
		return []string{"(no override applied)"}
	}
	var named, all []string
	visit := func(kind string, list []overrides.PolicyOverriders) {
		for _, p := range list {
			all = append(all, kind+" "+p.PolicyName)
			for _, o := range p.Overriders.Plaintext {
				if identityPath(o.Path) {
					named = append(named, fmt.Sprintf("%s %s: plaintext %s %s", kind, p.PolicyName, o.Operator, o.Path))
				}
			}
			for _, o := range p.Overriders.ImageOverrider {
				if o.Predicate != nil && (identityPath(o.Predicate.Path) || strings.HasPrefix(o.Predicate.Path, "/metadata/")) {
					named = append(named, fmt.Sprintf("%s %s: imageOverrider predicate %s", kind, p.PolicyName, o.Predicate.Path))
				}
			}
		}
	}
	visit("ClusterOverridePolicy", applied.ClusterOverridePolicies)
	visit("OverridePolicy", applied.OverridePolicies)
	if len(named) > 0 {
		return named
	}
	return all
}

// checkIdentity is the hub's re-check of a rendered manifest: nil when the
// overrides kept apiVersion, kind, namespace and name.
func checkIdentity(template, rendered *unstructured.Unstructured, applied *overrides.AppliedOverrides) error {
	changes := identityChanges(template, rendered)
	if len(changes) == 0 {
		return nil
	}
	return &IdentityError{changes: changes, overrides: culprits(applied)}
}
