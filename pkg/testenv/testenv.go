// Package testenv starts a real etcd and kube-apiserver (controller-runtime's
// envtest, with the binaries `make tools` builds into bin/), installs
// Flotilla's CRDs and hands out clients: an admin one and RBAC-limited ones
// for isolation tests.
//
// Besides the CRDs, Start applies the other manifests in manifests/crds (the
// ValidatingAdmissionPolicy); policies take effect asynchronously, so a test
// relying on one should probe it with a dry run first.
//
// Integration tests call Start; it skips under `go test -short` so the unit
// run stays fast, and fails with a clear message when the binaries are missing.
package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Env is a running control plane.
type Env struct {
	// Config is an admin (system:masters) client configuration.
	Config *rest.Config
	// Kube is a typed clientset built from Config.
	Kube kubernetes.Interface
	// Root is the repository root.
	Root string

	env      *envtest.Environment
	auditLog string
	// controllerManager runs with WithControllerManager.
	controllerManager *Process
}

// Start runs a fresh control plane for the test and stops it when the test
// ends. Each call gets its own etcd, so tests never see each other's objects.
func Start(t testing.TB, opts ...Option) *Env {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs a real kube-apiserver (run without -short)")
	}
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	assets := AssetsDir(root)
	for _, bin := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(assets, bin)); err != nil {
			t.Fatalf("testenv: %s not found in %s: run `make tools` first (or set KUBEBUILDER_ASSETS)", bin, assets)
		}
	}
	te := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{filepath.Join(root, "manifests", "crds")},
		ErrorIfCRDPathMissing: true,
		// make test-integration starts up to 16 control planes at once on
		// a 2-core machine (-p 4 -parallel 4); envtest's default of 20 s
		// per start attempt is less than one start takes there at peak.
		ControlPlaneStartTimeout: controlPlaneStartTimeout,
	}
	var set settings
	for _, o := range opts {
		o(&set)
	}
	if set.auditLog {
		if err := set.configureAudit(t, te); err != nil {
			t.Fatalf("testenv: %v", err)
		}
	}
	// Stop even a half-started control plane (e.g. a CRD the apiserver
	// refused), so a failing test never leaks etcd or kube-apiserver.
	t.Cleanup(func() {
		if err := te.Stop(); err != nil {
			t.Logf("testenv: stopping control plane: %v", err)
		}
	})
	cfg, err := te.Start()
	if err != nil {
		t.Fatalf("testenv: starting kube-apiserver: %v", err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := &Env{Config: cfg, Kube: kube, Root: root, env: te, auditLog: set.auditLogPath}
	if err := e.installNonCRDManifests(context.Background()); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	if len(set.controllers) > 0 {
		e.startControllerManager(t, set.controllers)
	}
	return e
}

// UserConfig returns a client configuration that authenticates as the given
// user and groups, with only the permissions RBAC grants them. Use it to prove
// least privilege (an agent identity must not read another cluster's Works).
func (e *Env) UserConfig(t testing.TB, name string, groups ...string) *rest.Config {
	t.Helper()
	user, err := e.env.AddUser(envtest.User{Name: name, Groups: groups}, e.Config)
	if err != nil {
		t.Fatalf("testenv: adding user %q: %v", name, err)
	}
	return user.Config()
}

// KubeconfigFor writes a kubeconfig file for cfg into the test's temp dir, for
// running binaries (hub, agent, kubectl) against the test apiserver.
func (e *Env) KubeconfigFor(t testing.TB, cfg *rest.Config) string {
	t.Helper()
	data, err := Kubeconfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// AssetsDir is where the control-plane binaries live: $KUBEBUILDER_ASSETS if
// set, else <root>/bin.
func AssetsDir(root string) string {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir
	}
	return filepath.Join(root, "bin")
}

// RepoRoot walks up from the working directory to the directory holding the
// project's go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && isProjectModule(data) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("testenv: repository root (go.mod of %s) not found above the working directory", modulePath)
		}
		dir = parent
	}
}

const modulePath = "github.com/flotilla-io/flotilla"

// controlPlaneStartTimeout bounds one attempt to start etcd or
// kube-apiserver (envtest retries a failed start).
const controlPlaneStartTimeout = 2 * time.Minute

func isProjectModule(gomod []byte) bool {
	line := "module " + modulePath + "\n"
	return len(gomod) >= len(line) && string(gomod[:len(line)]) == line
}
