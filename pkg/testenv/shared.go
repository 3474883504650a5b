package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// StartShared runs a control plane for a whole test binary: TestMain has no
// *testing.T to tie its lifetime to, so the caller stops it with Stop after
// m.Run. Tests sharing it keep apart by namespace and object names. It does
// not check -short: call it only when a test needs it.
func StartShared() (*Env, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	assets := AssetsDir(root)
	for _, bin := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(assets, bin)); err != nil {
			return nil, fmt.Errorf("testenv: %s not found in %s: run `make tools` first (or set KUBEBUILDER_ASSETS)", bin, assets)
		}
	}
	te := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{filepath.Join(root, "manifests", "crds")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := te.Start()
	if err != nil {
		_ = te.Stop()
		return nil, fmt.Errorf("testenv: starting kube-apiserver: %w", err)
	}
	e := &Env{Config: cfg, Root: root, env: te}
	if e.Kube, err = kubernetes.NewForConfig(cfg); err != nil {
		_ = te.Stop()
		return nil, err
	}
	if err := e.installNonCRDManifests(context.Background()); err != nil {
		_ = te.Stop()
		return nil, fmt.Errorf("testenv: %w", err)
	}
	return e, nil
}

// Stop ends a control plane from StartShared.
func (e *Env) Stop() error { return e.env.Stop() }
