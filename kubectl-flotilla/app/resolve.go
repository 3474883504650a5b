package app

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// TemplateRef is what a TEMPLATE argument names.
type TemplateRef struct {
	// TemplateKind is ResourceTemplate or ClusterResourceTemplate, or ""
	// when the argument named the embedded object (kind/name).
	TemplateKind string `json:"templateKind,omitempty"`
	// TemplateName is the template's name ("" for kind/name).
	TemplateName string `json:"templateName,omitempty"`
	// Kind and Name are the embedded object's (empty for a template name).
	Kind string `json:"kind,omitempty"`
	Name string `json:"name,omitempty"`
	// Namespace is "" for the cluster-scoped kinds.
	Namespace string `json:"namespace,omitempty"`
}

// shortKinds are kubectl's short names of the kinds templates usually
// carry, so `deploy/nginx` works as it does in kubectl.
var shortKinds = map[string]string{
	"deploy": "Deployment", "sts": "StatefulSet", "ds": "DaemonSet", "svc": "Service", "cm": "ConfigMap",
	"ns": "Namespace", "ing": "Ingress", "pvc": "PersistentVolumeClaim", "sa": "ServiceAccount", "cj": "CronJob",
	"hpa": "HorizontalPodAutoscaler", "pdb": "PodDisruptionBudget", "crd": "CustomResourceDefinition",
}

// ParseTemplateArg reads TEMPLATE: a template's name, resourcetemplate/NAME,
// clusterresourcetemplate/NAME, or KIND/NAME of the embedded object. The
// namespace is ns unless the template is cluster-scoped (clusterScoped, or
// named as clusterresourcetemplate/NAME).
func ParseTemplateArg(arg, ns string, clusterScoped bool) (TemplateRef, error) {
	kind, name, found := strings.Cut(arg, "/")
	if !found {
		kind, name = "", arg
	}
	if name == "" || strings.Contains(name, "/") {
		return TemplateRef{}, fmt.Errorf("TEMPLATE %q: want NAME, KIND/NAME, resourcetemplate/NAME or clusterresourcetemplate/NAME", arg)
	}
	lower := strings.ToLower(kind)
	switch {
	case lower == "clusterresourcetemplate" || lower == "clusterresourcetemplates" || lower == "clusterresourcetemplate.work.flotilla.io":
		return TemplateRef{TemplateKind: "ClusterResourceTemplate", TemplateName: name}, nil
	case kind == "" || lower == "resourcetemplate" || lower == "resourcetemplates" || lower == "resourcetemplate.work.flotilla.io":
		if clusterScoped {
			return TemplateRef{TemplateKind: "ClusterResourceTemplate", TemplateName: name}, nil
		}
		return TemplateRef{TemplateKind: "ResourceTemplate", TemplateName: name, Namespace: ns}, nil
	}
	if full, ok := shortKinds[lower]; ok {
		kind = full
	}
	ref := TemplateRef{Kind: kind, Name: name, Namespace: ns}
	if clusterScoped {
		ref.Namespace = ""
	}
	return ref, nil
}

// resolved is a TEMPLATE's template and binding as found; either may be
// nil (a template no policy selects has no binding; a binding named by
// kind/name may have lost its template).
type resolved struct {
	ref      TemplateRef
	template *workv1alpha1.ResourceTemplate
	binding  *workv1alpha1.ResourceBinding
	// bindingName is the binding the template has or would have.
	bindingName string
	// problem says why the template's binding name is unknown.
	problem string
}

// resolve fetches the template and binding ref names. Only a template
// named and not found is an error: everything else is shown as missing.
func resolve(ctx context.Context, c *clients, ref TemplateRef) (*resolved, error) {
	r := &resolved{ref: ref}
	w := c.flotilla.WorkV1alpha1()
	switch ref.TemplateKind {
	case "ResourceTemplate":
		t, err := w.ResourceTemplates(ref.Namespace).Get(ctx, ref.TemplateName, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		r.template = t
	case "ClusterResourceTemplate":
		t, err := w.ClusterResourceTemplates().Get(ctx, ref.TemplateName, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		r.template = workobjects.FromClusterTemplate(t)
	default:
		r.bindingName = workobjects.BindingName(ref.Kind, ref.Name)
	}
	if r.template != nil {
		obj, err := workobjects.Object(r.template)
		if err != nil {
			r.problem = err.Error()
			return r, nil
		}
		r.bindingName = workobjects.BindingName(obj.GetKind(), obj.GetName())
	}
	var err error
	if ref.Namespace == "" {
		var b *workv1alpha1.ClusterResourceBinding
		if b, err = w.ClusterResourceBindings().Get(ctx, r.bindingName, metav1.GetOptions{}); err == nil {
			r.binding = workobjects.FromClusterBinding(b)
		}
	} else {
		r.binding, err = w.ResourceBindings(ref.Namespace).Get(ctx, r.bindingName, metav1.GetOptions{})
	}
	switch {
	case apierrors.IsNotFound(err):
		r.binding = nil
		if r.template == nil {
			return nil, fmt.Errorf("no binding %s for %s/%s%s: is the name right, and does a policy select it?",
				r.bindingName, ref.Kind, ref.Name, inNamespace(ref.Namespace))
		}
	case err != nil:
		return nil, err
	}
	// Named by kind/name: the template is the binding's owner.
	if r.template == nil && r.binding != nil {
		if owner := metav1.GetControllerOf(r.binding); owner != nil {
			switch owner.Kind {
			case "ResourceTemplate":
				if t, err := w.ResourceTemplates(r.binding.Namespace).Get(ctx, owner.Name, metav1.GetOptions{}); err == nil {
					r.template = t
				}
			case "ClusterResourceTemplate":
				if t, err := w.ClusterResourceTemplates().Get(ctx, owner.Name, metav1.GetOptions{}); err == nil {
					r.template = workobjects.FromClusterTemplate(t)
				}
			}
		}
	}
	return r, nil
}

func inNamespace(ns string) string {
	if ns == "" {
		return " (cluster-scoped)"
	}
	return " in namespace " + ns
}
