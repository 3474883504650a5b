/*
Copyright The Flotilla Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Package interpreters holds the ResourceInterpreterCustomizations Flotilla
// ships for third-party kinds (Argo Rollouts' Rollout, the Flink operator's
// FlinkDeployment), as the YAML files users apply with
// `kubectl apply -k manifests/interpreters`, and loads them for the tests.
package interpreters

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"

	"sigs.k8s.io/yaml"

	configv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/config/v1alpha1"
)

//go:embed *.yaml
var files embed.FS

// Load returns every shipped customization, in file-name order (the
// kustomization itself is skipped). Each file holds exactly one, decoded
// strictly: a misspelt field fails here rather than being dropped.
func Load() ([]*configv1alpha1.ResourceInterpreterCustomization, error) {
	names, err := fs.Glob(files, "*.yaml")
	if err != nil {
		return nil, err
	}
	var out []*configv1alpha1.ResourceInterpreterCustomization
	for _, name := range names {
		if name == "kustomization.yaml" {
			continue
		}
		data, err := files.ReadFile(name)
		if err != nil {
			return nil, err
		}
		ric, err := decode(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out = append(out, ric)
	}
	return out, nil
}

// decode reads data, one YAML document.
func decode(data []byte) (*configv1alpha1.ResourceInterpreterCustomization, error) {
	if bytes.Contains(data, []byte("\n---")) {
		return nil, errors.New("want one document per file")
	}
	ric := &configv1alpha1.ResourceInterpreterCustomization{}
	if err := yaml.UnmarshalStrict(data, ric); err != nil {
		return nil, err
	}
	if gvk := ric.GroupVersionKind(); gvk != configv1alpha1.SchemeGroupVersion.WithKind("ResourceInterpreterCustomization") {
		return nil, fmt.Errorf("not a ResourceInterpreterCustomization: %s", gvk)
	}
	return ric, nil
}
