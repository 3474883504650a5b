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

// Package podreferences reads the objects of its own namespace a pod spec
// references (ConfigMaps, Secrets, PersistentVolumeClaims, the
// ServiceAccount): the one reading behind the built-in dependency
// interpreter of Deployments and the other pod-template kinds, and behind
// the CEL function podTemplateDependencies that customizations use for any
// other kind, so both always agree.
package podreferences

import (
	"sort"

	corev1 "k8s.io/api/core/v1"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

// Of maps each object spec references to whether some reference to it is
// required: ConfigMaps and Secrets of volumes (projected ones included),
// env and envFrom of every container (init and ephemeral ones included),
// the Secrets of imagePullSecrets and of the volume sources that name one
// (Kubernetes' VisitPodSecretNames: azureFile, cephfs, cinder, csi,
// flexVolume, iscsi, rbd, scaleIO, storageos), PersistentVolumeClaims of
// volumes and the ServiceAccount unless it is "default" (every namespace
// has it) — Karmada's default dependencies interpreter. A ConfigMap or
// Secret volume, env or envFrom with optional: true is an optional
// reference: the kubelet starts the pod without it.
func Of(spec *corev1.PodSpec) map[workv1alpha1.DependencyReference]bool {
	seen := map[workv1alpha1.DependencyReference]bool{}
	add := func(kind, name string, optional *bool) {
		if name == "" {
			return
		}
		ref := workv1alpha1.DependencyReference{APIVersion: "v1", Kind: kind, Name: name}
		seen[ref] = seen[ref] || optional == nil || !*optional
	}
	secretRef := func(r *corev1.LocalObjectReference) {
		if r != nil {
			add("Secret", r.Name, nil)
		}
	}
	for _, v := range spec.Volumes {
		if v.ConfigMap != nil {
			add("ConfigMap", v.ConfigMap.Name, v.ConfigMap.Optional)
		}
		if v.Secret != nil {
			add("Secret", v.Secret.SecretName, v.Secret.Optional)
		}
		if v.PersistentVolumeClaim != nil {
			add("PersistentVolumeClaim", v.PersistentVolumeClaim.ClaimName, nil)
		}
		if v.Projected != nil {
			for _, s := range v.Projected.Sources {
				if s.ConfigMap != nil {
					add("ConfigMap", s.ConfigMap.Name, s.ConfigMap.Optional)
				}
				if s.Secret != nil {
					add("Secret", s.Secret.Name, s.Secret.Optional)
				}
			}
		}
		// Volume sources whose credentials are a Secret of the pod's
		// namespace.
		if v.AzureFile != nil {
			add("Secret", v.AzureFile.SecretName, nil)
		}
		if v.CephFS != nil {
			secretRef(v.CephFS.SecretRef)
		}
		if v.Cinder != nil {
			secretRef(v.Cinder.SecretRef)
		}
		if v.CSI != nil {
			secretRef(v.CSI.NodePublishSecretRef)
		}
		if v.FlexVolume != nil {
			secretRef(v.FlexVolume.SecretRef)
		}
		if v.ISCSI != nil {
			secretRef(v.ISCSI.SecretRef)
		}
		if v.RBD != nil {
			secretRef(v.RBD.SecretRef)
		}
		if v.ScaleIO != nil {
			secretRef(v.ScaleIO.SecretRef)
		}
		if v.StorageOS != nil {
			secretRef(v.StorageOS.SecretRef)
		}
	}
	containers := append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...)
	for _, e := range spec.EphemeralContainers {
		containers = append(containers, corev1.Container{Env: e.Env, EnvFrom: e.EnvFrom})
	}
	for _, c := range containers {
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				continue
			}
			if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
				add("ConfigMap", r.Name, r.Optional)
			}
			if r := e.ValueFrom.SecretKeyRef; r != nil {
				add("Secret", r.Name, r.Optional)
			}
		}
		for _, e := range c.EnvFrom {
			if e.ConfigMapRef != nil {
				add("ConfigMap", e.ConfigMapRef.Name, e.ConfigMapRef.Optional)
			}
			if e.SecretRef != nil {
				add("Secret", e.SecretRef.Name, e.SecretRef.Optional)
			}
		}
	}
	for _, s := range spec.ImagePullSecrets {
		add("Secret", s.Name, nil)
	}
	sa := spec.ServiceAccountName
	if sa == "" {
		sa = spec.DeprecatedServiceAccount
	}
	if sa != "default" {
		add("ServiceAccount", sa, nil)
	}
	return seen
}

// ReadFields are the fields of a pod spec Of reads (the containers'
// env and envFrom only): what a caller converting an unstructured pod
// spec needs to convert.
var ReadFields = []string{"volumes", "initContainers", "containers", "ephemeralContainers",
	"imagePullSecrets", "serviceAccountName", "serviceAccount"}

// ContainerReadFields are the fields of a container Of reads.
var ContainerReadFields = []string{"env", "envFrom"}

// Sorted returns the references of refs (a set, or Of's map) in a stable
// order: by kind, name and apiVersion.
func Sorted[V any](refs map[workv1alpha1.DependencyReference]V) []workv1alpha1.DependencyReference {
	if len(refs) == 0 {
		return nil
	}
	out := make([]workv1alpha1.DependencyReference, 0, len(refs))
	for d := range refs {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.APIVersion < b.APIVersion
	})
	return out
}
