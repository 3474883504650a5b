package clusterstatus

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	flotillafake "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned/fake"
)

// newOneWriterController is a controller for a registered, verified member1
// whose Ready is ready, against a member answering readyz.
func newOneWriterController(t *testing.T, ready metav1.Condition, mayWrite func(context.Context, bool) error) (*Controller, *fakeMember, *flotillafake.Clientset, *clocktesting.FakeClock) {
	t.Helper()
	member := &fakeMember{}
	member.readyz.Store(http.StatusOK)
	server := httptest.NewServer(member)
	t.Cleanup(server.Close)
	memberKube := kubernetes.NewForConfigOrDie(&rest.Config{Host: server.URL})
	cluster := &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "member1"}, Spec: clusterv1alpha1.ClusterSpec{ID: "member-uid"}}
	ready.Type = clusterv1alpha1.ClusterConditionReady
	meta.SetStatusCondition(&cluster.Status.Conditions, ready)
	hub := flotillafake.NewSimpleClientset(cluster)
	clock := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC))
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	c := NewController(hub, memberKube, corelisters.NewNodeLister(indexer), corelisters.NewPodLister(indexer), nil, NewGate(),
		Options{ClusterName: "member1", Period: 10 * time.Second, FailureThreshold: 30 * time.Second, SuccessThreshold: 30 * time.Second,
			Clock: clock, MayWrite: mayWrite})
	return c, member, hub, clock
}

// Every write asks MayWrite first, and says whether it is a not-Ready
// status (which the agent checks against a fresh read of the hub Lease); a
// refusal writes nothing.
func TestWritesPassTheMayWriteGate(t *testing.T) {
	var asked []bool
	var refuse error
	c, member, hub, clock := newOneWriterController(t,
		metav1.Condition{Status: metav1.ConditionTrue, Reason: clusterv1alpha1.ClusterReasonReady},
		func(_ context.Context, notReady bool) error { asked = append(asked, notReady); return refuse })
	ctx := context.Background()
	ready := func() *metav1.Condition {
		return meta.FindStatusCondition(mustGet(t, hub).Status.Conditions, clusterv1alpha1.ClusterConditionReady)
	}

	// Healthy: the write (inventory, message) asks with notReady=false.
	c.Sync(ctx)
	if len(asked) == 0 || asked[len(asked)-1] {
		t.Fatalf("MayWrite calls = %v, want a last one with notReady=false", asked)
	}

	// The member fails past the threshold while another agent speaks for
	// the cluster: the False status is refused, and asked as notReady.
	member.readyz.Store(http.StatusInternalServerError)
	refuse = errors.New("agent other renewed the hub Lease 1s ago")
	for range 4 {
		clock.Step(10 * time.Second)
		c.Sync(ctx)
	}
	if got := ready(); got.Status != metav1.ConditionTrue {
		t.Fatalf("Ready written as %s despite MayWrite refusing", got.Status)
	}
	if !asked[len(asked)-1] {
		t.Fatalf("the not-Ready write was asked with notReady=false: %v", asked)
	}

	// Allowed again: the False status goes out.
	refuse = nil
	clock.Step(10 * time.Second)
	c.Sync(ctx)
	if got := ready(); got.Status != metav1.ConditionFalse {
		t.Fatalf("Ready = %s once allowed, want False", got.Status)
	}
}

// After the hub's Unknown (nobody renewed the Lease, e.g. through a
// member-wide outage in which no agent could lead), the new leader's Ready
// turns True only after the success threshold, as from False.
func TestNewLeaderDampsFromTheHubsUnknown(t *testing.T) {
	c, _, hub, clock := newOneWriterController(t,
		metav1.Condition{Status: metav1.ConditionUnknown, Reason: clusterv1alpha1.ClusterReasonStatusUnknown, Message: "the cluster's agent has not renewed its Lease"}, nil)
	ctx := context.Background()
	ready := func() *metav1.Condition {
		return meta.FindStatusCondition(mustGet(t, hub).Status.Conditions, clusterv1alpha1.ClusterConditionReady)
	}
	c.Sync(ctx)
	for range 3 {
		if got := ready(); got.Status != metav1.ConditionUnknown || got.Reason != clusterv1alpha1.ClusterReasonStatusUnknown {
			t.Fatalf("Ready = %s/%s before the success threshold, want the hub's Unknown kept", got.Status, got.Reason)
		}
		clock.Step(10 * time.Second)
		c.Sync(ctx)
	}
	if got := ready(); got.Status != metav1.ConditionTrue {
		t.Fatalf("after 30s of success: Ready = %s, want True", got.Status)
	}
}
