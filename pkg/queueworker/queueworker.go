// Package queueworker runs the standard client-go worker loop over a
// rate-limited workqueue: take a key, sync it, forget it on success, requeue
// it with backoff on failure.
package queueworker

import (
	"context"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// Run starts workers that call sync for each key of queue, and blocks until
// ctx is done. name labels the log line of a failed sync.
func Run(ctx context.Context, name string, queue workqueue.TypedRateLimitingInterface[string], workers int, sync func(context.Context, string) error) {
	for range workers {
		go wait.UntilWithContext(ctx, func(ctx context.Context) {
			for next(ctx, name, queue, sync) {
			}
		}, time.Second)
	}
	<-ctx.Done()
}

func next(ctx context.Context, name string, queue workqueue.TypedRateLimitingInterface[string], sync func(context.Context, string) error) bool {
	key, quit := queue.Get()
	if quit {
		return false
	}
	defer queue.Done(key)
	if err := sync(ctx, key); err != nil {
		if apierrors.IsConflict(err) {
			// Another writer got there first: routine, retried on fresh state.
			klog.FromContext(ctx).V(2).Info("Sync conflicted; retrying", "controller", name, "key", key, "err", err)
		} else {
			klog.FromContext(ctx).Error(err, "Sync failed; retrying with backoff", "controller", name, "key", key)
		}
		queue.AddRateLimited(key)
		return true
	}
	queue.Forget(key)
	return true
}
