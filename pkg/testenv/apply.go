package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
)

// ApplyFile creates every object of a multi-document YAML file.
func (e *Env) ApplyFile(ctx context.Context, path string) error {
	objs, err := DecodeFile(path)
	if err != nil {
		return err
	}
	if err := e.CreateObjects(ctx, objs...); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// DecodeFile reads every object of a multi-document YAML file, for a test
// to look at or change before CreateObjects.
func DecodeFile(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		out = append(out, u)
	}
}

// CreateObjects creates objs as the admin, in order.
func (e *Env) CreateObjects(ctx context.Context, objs ...*unstructured.Unstructured) error {
	groups, err := restmapper.GetAPIGroupResources(e.Kube.Discovery())
	if err != nil {
		return err
	}
	mapper := restmapper.NewDiscoveryRESTMapper(groups)
	dyn, err := dynamic.NewForConfig(e.Config)
	if err != nil {
		return err
	}
	for _, u := range objs {
		gvk := u.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return err
		}
		client := dyn.Resource(m.Resource).Namespace(u.GetNamespace())
		if _, err := client.Create(ctx, u, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	return nil
}

// installNonCRDManifests applies what manifests/crds holds besides the CRDs
// (the admission policy for rules CRD validation cannot express), so every
// integration test sees the same API rules as `make up`.
func (e *Env) installNonCRDManifests(ctx context.Context) error {
	dir := filepath.Join(e.Root, "manifests", "crds")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, entry := range entries {
		name := entry.Name()
		if !strings.HasSuffix(name, ".yaml") || name == "kustomization.yaml" || strings.Contains(name, ".flotilla.io_") {
			continue
		}
		if err := e.ApplyFile(ctx, filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}
