package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// manifestImage is the image the manifests (manifests/hub, manifests/agent)
// name; the Component's images: entry rewrites it, so the manifests never
// change with a build.
const manifestImage = defaultRepository

// componentFile is kustomize/image/kustomization.yaml deploying repo:tag.
func componentFile(repo, tag string) string {
	return fmt.Sprintf(`# The Flotilla image every kustomization deploys: kustomize/hub (and so
# kustomize/hub-dns-traffic) and kustomize/agent/base include this
# Component, whose images: entry rewrites the manifests' %[1]s.
# The one place the image is chosen: `+"`make image IMAGE=REPO:TAG`"+` (go run
# ./hack/image --kustomize) rewrites this file with the image it built.
# docs/install.md#image.
apiVersion: kustomize.config.k8s.io/v1alpha1
kind: Component
images:
- name: %[1]s
  newName: %[2]s
  newTag: %[3]q
`, manifestImage, repo, tag)
}

// splitRef is ref as the user spelt it (kustomize matches names literally:
// no index.docker.io/library/ added) cut into repository and tag.
func splitRef(ref name.Tag, spelt string) (repo, tag string) {
	tag = ref.TagStr()
	return strings.TrimSuffix(spelt, ":"+tag), tag
}

// writeComponent rewrites the Component at path to deploy ref.
func writeComponent(path string, ref name.Tag) error {
	repo, tag := splitRef(ref, ref.String())
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(componentFile(repo, tag)), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
