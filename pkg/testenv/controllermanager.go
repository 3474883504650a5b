package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// DefaultControllers are the kube-controller-manager controllers
// WithControllerManager runs when given none: the namespace controller
// (which empties and removes a deleted namespace, honouring finalizers) and
// the garbage collector (owner references). envtest runs neither, so without
// them a deleted namespace stays Terminating and owned objects stay.
var DefaultControllers = []string{"namespace", "garbagecollector"}

// WithControllerManager runs a real kube-controller-manager (bin/) against
// the test apiserver, as the envtest admin, with only the given controllers
// (DefaultControllers if none): a deleted namespace really goes away, and
// with it everything in it, the way a real host cluster behaves.
func WithControllerManager(controllers ...string) Option {
	if len(controllers) == 0 {
		controllers = DefaultControllers
	}
	return func(s *settings) { s.controllers = controllers }
}

// startControllerManager starts kube-controller-manager and waits until its
// namespace controller (if it runs) removes a namespace.
func (e *Env) startControllerManager(t testing.TB, controllers []string) {
	t.Helper()
	bin := filepath.Join(AssetsDir(e.Root), "kube-controller-manager")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("testenv: kube-controller-manager not found in %s: run `make tools` first (or set KUBEBUILDER_ASSETS)", filepath.Dir(bin))
	}
	kubeconfig := e.KubeconfigFor(t, e.Config)
	p := StartProcess(t, bin,
		"--kubeconfig="+kubeconfig,
		"--controllers="+strings.Join(controllers, ","),
		"--leader-elect=false",
		"--secure-port=0",
		"--authentication-skip-lookup",
		// The garbage collector and the namespace controller resync
		// discovery every 30 s by default; CRDs installed by the test
		// are then known at once.
		"--namespace-sync-period=10s",
		"--v=1")
	e.controllerManager = p
	if !slices.Contains(controllers, "namespace") {
		return
	}
	// The namespace controller is up once it removes a namespace.
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "testenv-kcm-probe-"}}
	created, err := e.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	if err := e.Kube.CoreV1().Namespaces().Delete(ctx, created.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := e.Kube.CoreV1().Namespaces().Get(ctx, created.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("testenv: kube-controller-manager's namespace controller did not remove a namespace within 60s:\n%s", tail(p.Output(), 4000))
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return fmt.Sprintf("…%s", s[len(s)-n:])
}
