package manifeststest

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// OverlaysDir is where the agent overlays live, relative to the repository
// (and to a KustomizeTree).
const OverlaysDir = "kustomize/agent/overlays"

// KustomizeTree copies the kustomizations of the repository at root
// (kustomize/ and the manifests/ they build on) to dst and gives every agent
// overlay its placeholder hub.kubeconfig with `hack/agent-overlay.sh NAME`,
// as a fresh clone has them after the documented command. No hub.kubeconfig
// is in git (it holds a token), so tests render this copy: it builds on a
// fresh clone, and never holds a token a developer generated in the checkout.
func KustomizeTree(root, dst string) error {
	for _, top := range []string{"kustomize", "manifests"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			if d.IsDir() {
				return os.MkdirAll(filepath.Join(dst, rel), 0o755)
			}
			if name := d.Name(); name == "hub.kubeconfig" || strings.HasPrefix(name, ".hub.kubeconfig.") || !d.Type().IsRegular() {
				return nil
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
		})
		if err != nil {
			return fmt.Errorf("copying %s: %w", top, err)
		}
	}
	overlays, err := filepath.Glob(filepath.Join(dst, OverlaysDir, "*", "kustomization.yaml"))
	if err != nil {
		return err
	}
	for _, k := range overlays {
		name := filepath.Base(filepath.Dir(k))
		// The overlay's kustomization.yaml exists: the script only writes
		// the placeholder.
		cmd := exec.Command(filepath.Join(root, "hack", "agent-overlay.sh"), name)
		cmd.Env = append(os.Environ(), "OVERLAYS_DIR="+filepath.Join(dst, OverlaysDir))
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("hack/agent-overlay.sh %s: %w\n%s", name, err, out)
		}
	}
	return nil
}
