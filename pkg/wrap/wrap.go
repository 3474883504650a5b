// Package wrap turns native Kubernetes manifests into Flotilla templates
// (`hub wrap`): each object becomes a ResourceTemplate (namespaced kinds) or
// a ClusterResourceTemplate (cluster-scoped kinds) holding it in
// spec.manifest, so existing YAML reaches the hub with one pipe. With
// FromKarmada it also rewrites Karmada's policy objects into Flotilla's and
// reports every field Flotilla cannot hold; with FromOCM and FromKubeFleet
// it converts Open Cluster Management's and KubeFleet's placements and
// rollout strategies (peers.go) the same way.
//
// Everything here works on bytes and unstructured objects; reading files
// (ReadInputs) and discovery are the only I/O, and the command owns them.
package wrap

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"sigs.k8s.io/yaml"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

// Options tune Wrap.
type Options struct {
	// Namespace is given to namespaced objects that name none (kubectl's
	// -n). Empty means "default".
	Namespace string

	// FromKarmada converts Karmada objects instead of refusing them.
	FromKarmada bool

	// FromOCM converts Open Cluster Management objects
	// (ManifestWorkReplicaSet with its Placement) instead of refusing them.
	FromOCM bool

	// FromKubeFleet converts KubeFleet objects (ClusterResourcePlacement,
	// with its ClusterStagedUpdateStrategy) instead of refusing them.
	FromKubeFleet bool

	// Scope, if set, is asked first for the scope of a kind (discovery on
	// a cluster that serves it). The built-in tables answer when it does
	// not know.
	Scope ScopeFunc

	// ClusterScopedKinds are kinds to treat as cluster-scoped whatever the
	// other sources say (--cluster-scoped-kind).
	ClusterScopedKinds []schema.GroupKind
}

// Finding is a field or an object that Flotilla cannot hold and that was
// left out of the output.
type Finding struct {
	// Object is "Kind namespace/name" or "Kind name".
	Object string
	// Path is the JSON path of the field; empty when the whole object is
	// left out.
	Path string
	// Message says what was wrong.
	Message string
	// Source is the file and document the object came from.
	Source string
}

func (f Finding) String() string {
	if f.Path == "" {
		return fmt.Sprintf("%s: %s (%s)", f.Object, f.Message, f.Source)
	}
	return fmt.Sprintf("%s: %s: %s (%s)", f.Object, f.Path, f.Message, f.Source)
}

// Result is what Wrap produced.
type Result struct {
	// Objects are the output objects in input order: templates, converted
	// Karmada objects and Flotilla objects passed through.
	Objects []*unstructured.Unstructured
	// Notes say what was decided that a reader might not expect: renamed
	// templates, assumed scopes, rewritten label keys.
	Notes []string
	// Unsupported are the fields and objects that were dropped.
	Unsupported []Finding

	// peerPolicies are the policies built from OCM and KubeFleet objects
	// (hub wrap answers for all of their fields, where a converted Karmada
	// policy keeps its author's values); the fuzz target checks them.
	peerPolicies []*unstructured.Unstructured
}

// YAML is the output as one YAML stream, ready for `kubectl apply -f -`.
func (r *Result) YAML() ([]byte, error) {
	var buf bytes.Buffer
	for i, obj := range r.Objects {
		data, err := yaml.Marshal(obj.Object)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
		if i > 0 {
			buf.WriteString("---\n")
		}
		buf.Write(data)
	}
	return buf.Bytes(), nil
}

// Template kinds.
const (
	KindResourceTemplate        = "ResourceTemplate"
	KindClusterResourceTemplate = "ClusterResourceTemplate"
)

// AnnotationLastApplied is kubectl's client-side apply record; it describes
// the object on the cluster it came from, not the template.
const AnnotationLastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// serverFields are the metadata fields an apiserver fills in. Copied into a
// template they would be wrong on every member (or refused there).
var serverFields = []string{"uid", "resourceVersion", "generation", "creationTimestamp", "managedFields",
	"selfLink", "deletionTimestamp", "deletionGracePeriodSeconds"}

// Strip removes what a server populated from obj: status,
// metadata.uid, resourceVersion, generation, creationTimestamp,
// managedFields, selfLink, deletionTimestamp, deletionGracePeriodSeconds,
// ownerReferences, the kubectl last-applied annotation and a Service's
// allocated cluster IPs. `kubectl get -o yaml` output thus
// wraps into the object its author wrote.
func Strip(obj *unstructured.Unstructured) {
	delete(obj.Object, "status")
	// A Service's allocated cluster IPs belong to the source cluster's
	// service range; a member would refuse or clash with them. Headless
	// ("None") is the author's choice and stays.
	if obj.GetAPIVersion() == "v1" && obj.GetKind() == "Service" {
		if spec, ok := obj.Object["spec"].(map[string]any); ok && spec["clusterIP"] != "None" {
			delete(spec, "clusterIP")
			delete(spec, "clusterIPs")
		}
	}
	md, ok := obj.Object["metadata"].(map[string]any)
	if !ok {
		return
	}
	for _, f := range serverFields {
		delete(md, f)
	}
	// Owner UIDs name objects of the source cluster; on a member they would
	// point at nothing (and the garbage collector would delete the object).
	delete(md, "ownerReferences")
	if ann, ok := md["annotations"].(map[string]any); ok {
		delete(ann, AnnotationLastApplied)
		if len(ann) == 0 {
			delete(md, "annotations")
		}
	}
}

// IsFlotillaGroup says whether group is one of Flotilla's API groups.
func IsFlotillaGroup(group string) bool {
	return group == "flotilla.io" || strings.HasSuffix(group, ".flotilla.io")
}

// IsKarmadaGroup says whether group is one of Karmada's API groups.
func IsKarmadaGroup(group string) bool {
	return group == "karmada.io" || strings.HasSuffix(group, ".karmada.io")
}

// pending is a native object on its way into a template.
type pending struct {
	sourced
	namespaced bool
	namespace  string // the template's
	out        *unstructured.Unstructured
}

// Wrap reads the inputs and returns the output objects. Bad input (not
// YAML, an object without apiVersion, kind or name, a Karmada object
// without FromKarmada, two objects that would make the same template) is an
// error naming every file and document at fault; then there is no Result.
// Unsupported Karmada fields are not errors: they are in the Result, and
// the caller decides whether to write it.
func Wrap(inputs []Input, opts Options) (*Result, error) {
	if opts.Namespace == "" {
		opts.Namespace = "default"
	}
	res := &Result{}
	var errs []error
	var natives []*pending
	var converted []*unstructured.Unstructured
	var peers []*peerObject
	noted := map[schema.GroupKind]bool{}
	for _, in := range inputs {
		objs, err := decodeInput(in)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, s := range objs {
			gvk := s.obj.GroupVersionKind()
			switch {
			case IsFlotillaGroup(gvk.Group):
				// Already a Flotilla object: written by hand, or the
				// output of an earlier wrap. Passing it through makes
				// wrapping idempotent.
				res.Objects = append(res.Objects, s.obj)
			case IsKarmadaGroup(gvk.Group):
				if !opts.FromKarmada {
					errs = append(errs, fmt.Errorf("%s: %s %s is a Karmada object; convert it with --from-karmada",
						s.src, gvk.Kind, s.obj.GetName()))
					continue
				}
				out, err := convertKarmada(s, opts, res)
				if err != nil {
					errs = append(errs, err)
					continue
				}
				if out != nil {
					res.Objects = append(res.Objects, out)
					converted = append(converted, out)
				}
			case IsOCMGroup(gvk.Group) || IsKubeFleetGroup(gvk.Group):
				p, err := collectPeer(s, opts, noted, res, &natives)
				if err != nil {
					errs = append(errs, err)
					continue
				}
				peers = append(peers, p)
			default:
				p := &pending{sourced: s}
				p.namespaced = scopeOf(gvk, opts, noted, res)
				p.out = &unstructured.Unstructured{} // placeholder keeps input order
				res.Objects = append(res.Objects, p.out)
				natives = append(natives, p)
			}
		}
	}
	if len(errs) > 0 {
		return nil, utilerrors.NewAggregate(errs)
	}
	if err := convertPeers(peers, natives, opts, noted, res); err != nil {
		return nil, err
	}
	if err := makeTemplates(natives, opts, res); err != nil {
		return nil, err
	}
	noteMissingDeps(converted, natives, res)
	// Peer objects that became nothing (a Placement, a strategy) leave
	// their place empty.
	res.Objects = slices.DeleteFunc(res.Objects, func(o *unstructured.Unstructured) bool { return o.Object == nil })
	return res, nil
}

// scopeOf decides whether a native kind is namespaced: the user's
// --cluster-scoped-kind first, then discovery, then the built-in tables,
// then "namespaced" with a note (once per kind) so a wrong guess shows.
func scopeOf(gvk schema.GroupVersionKind, opts Options, noted map[schema.GroupKind]bool, res *Result) bool {
	gk := gvk.GroupKind()
	for _, c := range opts.ClusterScopedKinds {
		if c == gk {
			return false
		}
	}
	if opts.Scope != nil {
		if ns, known := opts.Scope(gvk); known {
			return ns
		}
	}
	if ns, known := BuiltinScope(gvk); known {
		return ns
	}
	if !noted[gk] {
		noted[gk] = true
		res.Notes = append(res.Notes, fmt.Sprintf("%s: scope unknown, assumed namespaced "+
			"(if it is cluster-scoped, pass --cluster-scoped-kind %s, or --kubeconfig to ask a cluster that serves it)",
			groupKindString(gk), groupKindString(gk)))
	}
	return true
}

func groupKindString(gk schema.GroupKind) string {
	if gk.Group == "" {
		return gk.Kind
	}
	return gk.Kind + "." + gk.Group
}

// makeTemplates builds the templates once every object is known, because a
// template's name depends on the others: objects of different kinds that
// share a name and a namespace (a Deployment and a Service "web") would
// make the same template, so those are named <name>-<kind>.
func makeTemplates(natives []*pending, opts Options, res *Result) error {
	type slot struct {
		kind, namespace, name string
	}
	kindsAt := map[slot]map[string]bool{}
	for _, p := range natives {
		Strip(p.obj)
		if opts.FromKarmada {
			rewriteKarmadaKeys(p.obj.Object, describe(p.obj.GetKind(), p.obj.GetNamespace(), p.obj.GetName()), res)
		}
		if p.namespaced {
			p.namespace = p.obj.GetNamespace()
			if p.namespace == "" {
				p.namespace = opts.Namespace
			}
		} else if ns := p.obj.GetNamespace(); ns != "" {
			// A ClusterResourceTemplate's manifest must name no namespace
			// (the hub's admission policy refuses it); a cluster-scoped
			// object never had one that meant anything.
			unstructured.RemoveNestedField(p.obj.Object, "metadata", "namespace")
			res.Notes = append(res.Notes, fmt.Sprintf("%s %s: cluster-scoped, metadata.namespace %q removed (%s)",
				p.obj.GetKind(), p.obj.GetName(), ns, p.src))
		}
		s := slot{templateKind(p.namespaced), p.namespace, p.obj.GetName()}
		if kindsAt[s] == nil {
			kindsAt[s] = map[string]bool{}
		}
		kindsAt[s][p.obj.GroupVersionKind().GroupKind().String()] = true
	}

	taken := map[slot]*pending{}
	var errs []error
	for _, p := range natives {
		name := p.obj.GetName()
		s := slot{templateKind(p.namespaced), p.namespace, name}
		if len(kindsAt[s]) > 1 {
			name = name + "-" + strings.ToLower(p.obj.GetKind())
			res.Notes = append(res.Notes, fmt.Sprintf("%s %s: template named %s because other kinds in %s are also named %s (%s)",
				p.obj.GetKind(), describeName(p.namespace, p.obj.GetName()), name, scopeName(p.namespace), p.obj.GetName(), p.src))
			s.name = name
		}
		if prev, dup := taken[s]; dup {
			errs = append(errs, fmt.Errorf("%s: %s %s would be %s %s, like %s %s (%s); rename one of them",
				p.src, p.obj.GetKind(), p.obj.GetName(), s.kind, describeName(s.namespace, s.name),
				prev.obj.GetKind(), prev.obj.GetName(), prev.src))
			continue
		}
		taken[s] = p
		md := map[string]any{"name": name}
		if p.namespaced {
			md["namespace"] = p.namespace
		}
		p.out.Object = map[string]any{
			"apiVersion": workv1alpha1.SchemeGroupVersion.String(),
			"kind":       s.kind,
			"metadata":   md,
			"spec":       map[string]any{"manifest": p.obj.Object},
		}
	}
	if len(errs) > 0 {
		return utilerrors.NewAggregate(errs)
	}
	return nil
}

func templateKind(namespaced bool) string {
	if namespaced {
		return KindResourceTemplate
	}
	return KindClusterResourceTemplate
}

func describe(kind, namespace, name string) string {
	return kind + " " + describeName(namespace, name)
}

func describeName(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

func scopeName(namespace string) string {
	if namespace == "" {
		return "the cluster scope"
	}
	return "namespace " + namespace
}

// sortedKeys returns m's keys in order, so walks and messages are stable.
func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
