package e2e

import (
	"context"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// availabilitySampler records the lowest sum of the nginx Deployment's
// availableReplicas on two members, sampled every 250 ms.
type availabilitySampler struct {
	mu      sync.Mutex
	lowest  int32
	samples int
	cancel  context.CancelFunc
	done    chan struct{}
}

func startAvailabilitySampler(ctx context.Context, a, b kubernetes.Interface, ns string) *availabilitySampler {
	sctx, cancel := context.WithCancel(ctx)
	s := &availabilitySampler{lowest: 1 << 30, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer GinkgoRecover()
		defer close(s.done)
		for sctx.Err() == nil {
			a1, err1 := fbAvailable(sctx, a, ns)
			a2, err2 := fbAvailable(sctx, b, ns)
			if err1 == nil && err2 == nil {
				s.mu.Lock()
				s.lowest = min(s.lowest, a1+a2)
				s.samples++
				s.mu.Unlock()
			}
			time.Sleep(250 * time.Millisecond)
		}
	}()
	DeferCleanup(func() { s.stop() })
	return s
}

// stop ends the sampling (idempotent) and returns the lowest sum and the
// number of samples.
func (s *availabilitySampler) stop() (int32, int) {
	s.cancel()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lowest, s.samples
}

// fbAvailable is the nginx Deployment's availableReplicas on member (0
// when it does not exist).
func fbAvailable(ctx context.Context, member kubernetes.Interface, ns string) (int32, error) {
	d, err := member.AppsV1().Deployments(ns).Get(ctx, "nginx", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return d.Status.AvailableReplicas, nil
}

func fbAvailableOn(ctx context.Context, member kubernetes.Interface, ns string) int32 {
	n, _ := fbAvailable(ctx, member, ns)
	return n
}

func fbSpecReplicas(ctx context.Context, member kubernetes.Interface, ns string) int32 {
	d, err := member.AppsV1().Deployments(ns).Get(ctx, "nginx", metav1.GetOptions{})
	if err != nil || d.Spec.Replicas == nil {
		return -1
	}
	return *d.Spec.Replicas
}
