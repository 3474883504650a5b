package clustertaint

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestGuardConfigMapRoundTrip(t *testing.T) {
	at := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	s := GuardState{Evaluated: true, Mode: GuardPartialDisruption, NotReady: 2, Total: 3,
		Regions: map[string]RegionState{"": {Mode: GuardNormal, Total: 1}, "eu": {Mode: GuardFullDisruption, NotReady: 2, Total: 2}}}
	data := GuardConfigMapData(s, at)
	g, err := ParseGuardConfigMap(data)
	if err != nil {
		t.Fatal(err)
	}
	if g.Mode != GuardPartialDisruption || g.NotReady != 2 || g.Total != 3 || !g.Since.Equal(at) ||
		g.Regions["eu"] != (PublishedRegion{Mode: GuardFullDisruption, NotReady: 2, Total: 2}) || g.Regions[""].Mode != GuardNormal {
		t.Errorf("round trip %+v", g)
	}
	// The same verdict later is the same verdict: no rewrite.
	if !sameVerdict(data, GuardConfigMapData(s, at.Add(time.Hour))) {
		t.Error("a later time alone counts as a new verdict")
	}
	for name, next := range map[string]GuardState{
		"mode":        {Evaluated: true, Mode: GuardNormal, NotReady: 2, Total: 3, Regions: s.Regions},
		"counts":      {Evaluated: true, Mode: GuardPartialDisruption, NotReady: 1, Total: 3, Regions: s.Regions},
		"region mode": {Evaluated: true, Mode: GuardPartialDisruption, NotReady: 2, Total: 3, Regions: map[string]RegionState{"": {Mode: GuardNormal, Total: 1}, "eu": {Mode: GuardNormal, Total: 2}}},
	} {
		if sameVerdict(data, GuardConfigMapData(next, at)) {
			t.Errorf("a change of %s is not a new verdict", name)
		}
	}
	for _, bad := range []map[string]string{nil, {GuardKeyMode: GuardNormal, GuardKeyRegions: "{"}} {
		if _, err := ParseGuardConfigMap(bad); err == nil {
			t.Errorf("ParseGuardConfigMap(%v) = nil error", bad)
		}
	}
}

// Publish must not wait for the ConfigMap write (it sits on the path to a
// NoExecute taint), and verdicts submitted during a write are coalesced
// into the latest.
func TestPublishDoesNotWaitForTheWrite(t *testing.T) {
	client := fake.NewSimpleClientset()
	release, started := make(chan struct{}), make(chan struct{}, 10)
	var writes []string
	var mu sync.Mutex
	client.PrependReactor("*", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetVerb() != "create" && a.GetVerb() != "update" {
			return false, nil, nil
		}
		started <- struct{}{}
		<-release
		// Create and update actions both carry the object.
		cm := a.(interface{ GetObject() runtime.Object }).GetObject().(*corev1.ConfigMap)
		mu.Lock()
		writes = append(writes, a.GetVerb()+" "+cm.Data[GuardKeyNotReady])
		mu.Unlock()
		return false, nil, nil // the tracker stores it
	})
	p := NewGuardPublisher(client, "flotilla-system")
	attempts := make(chan error, 10)
	p.published = func(err error) { attempts <- err }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	state := func(notReady int) GuardState {
		return GuardState{Evaluated: true, Mode: GuardNormal, NotReady: notReady, Total: 10}
	}
	// Returns with the create blocked in the reactor (the test would hang
	// here if Publish waited for it).
	p.Publish(ctx, state(1))
	<-started
	p.Publish(ctx, state(2))
	p.Publish(ctx, state(3))
	close(release)
	if err := <-attempts; err != nil {
		t.Fatal(err)
	}
	if err := <-attempts; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	// The first verdict, then only the latest of the two submitted during
	// it (the informer may not have seen the create yet: then the
	// second write is a create that finds it, AlreadyExists, and the
	// next evaluation writes it).
	if len(writes) != 2 || writes[0] != "create 1" || writes[1][len(writes[1])-1] != '3' {
		t.Errorf("writes %v, want the first verdict then the latest (3)", writes)
	}
}
