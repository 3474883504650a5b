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

package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// FieldOverrider changes a JSON or YAML document held in one string field
// of the object, e.g. a ConfigMap's data["config.yaml"] (Karmada's
// FieldOverrider, v1.12): the string is parsed, the operations are applied
// to the document as JSON-patch operations, and the document is written
// back into the field. Exactly one of JSON and YAML is set. Like a
// plaintext path, the field may not be the object's identity.
// +kubebuilder:validation:XValidation:rule="!(has(self.json) && size(self.json) > 0 && has(self.yaml) && size(self.yaml) > 0)",message="fieldOverrider sets both json and yaml: set exactly one"
// +kubebuilder:validation:XValidation:rule="(has(self.json) && size(self.json) > 0) || (has(self.yaml) && size(self.yaml) > 0)",message="fieldOverrider sets neither json nor yaml: set exactly one"
// +kubebuilder:validation:XValidation:rule="!(self.fieldPath == '/apiVersion' || self.fieldPath == '/kind' || self.fieldPath == '/metadata/name' || self.fieldPath == '/metadata/namespace' || self.fieldPath == '/metadata/generateName')",message="fieldPath may not change the object's identity (/apiVersion, /kind, /metadata/name, /metadata/namespace, /metadata/generateName)"
type FieldOverrider struct {
	// FieldPath is an RFC 6901 JSON pointer to the string field that holds
	// the document, e.g. /data/config.yaml ("~1" stands for "/" and "~0"
	// for "~" in a key).
	// +kubebuilder:validation:Pattern=`^/`
	// +kubebuilder:validation:MaxLength=1024
	FieldPath string `json:"fieldPath"`

	// JSON are the operations on the field's document read as JSON.
	// +kubebuilder:validation:MaxItems=64
	// +optional
	JSON []JSONPatchOperation `json:"json,omitempty"`

	// YAML are the operations on the field's document read as YAML.
	// +kubebuilder:validation:MaxItems=64
	// +optional
	YAML []YAMLPatchOperation `json:"yaml,omitempty"`
}

// JSONPatchOperation is one operation on a JSON document held in a field.
// A value is required for add and replace and not allowed for remove:
// CRD rules cannot see an untyped field, so the admission policy
// flotilla-field-overrider-values (manifests/crds) checks it.
type JSONPatchOperation struct {
	// SubPath is an RFC 6901 JSON pointer into the document ("" is the
	// whole document), e.g. /spec/replicas.
	// +kubebuilder:validation:Pattern=`^(/|$)`
	// +kubebuilder:validation:MaxLength=1024
	SubPath string `json:"subPath"`

	// Operator is add, remove or replace, as in JSON patch (RFC 6902).
	// +kubebuilder:validation:Enum=add;remove;replace
	Operator OverriderOperator `json:"operator"`

	// Value is the JSON value to add or replace with; not allowed for
	// remove.
	// +optional
	Value apiextensionsv1.JSON `json:"value,omitempty"`
}

// YAMLPatchOperation is one operation on a YAML document held in a field.
// A value is required for add and replace and not allowed for remove:
// CRD rules cannot see an untyped field, so the admission policy
// flotilla-field-overrider-values (manifests/crds) checks it.
type YAMLPatchOperation struct {
	// SubPath is an RFC 6901 JSON pointer into the document ("" is the
	// whole document), e.g. /app/database/port.
	// +kubebuilder:validation:Pattern=`^(/|$)`
	// +kubebuilder:validation:MaxLength=1024
	SubPath string `json:"subPath"`

	// Operator is add, remove or replace, as in JSON patch (RFC 6902).
	// +kubebuilder:validation:Enum=add;remove;replace
	Operator OverriderOperator `json:"operator"`

	// Value is the value (written as JSON, or YAML in a manifest) to add
	// or replace with; not allowed for remove.
	// +optional
	Value apiextensionsv1.JSON `json:"value,omitempty"`
}
