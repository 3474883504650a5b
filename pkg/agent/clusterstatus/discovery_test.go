package clusterstatus

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	flotillafake "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned/fake"
)

// etagServer serves /api and /apis with an ETag (none when etag is "") and
// answers 304 to a matching If-None-Match, as kube-apiserver's aggregated
// discovery does.
func etagServer(t *testing.T, etag *atomic.Value, status int) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api" && r.URL.Path != "/apis" {
			http.NotFound(w, r)
			return
		}
		if status != http.StatusOK {
			w.WriteHeader(status)
			return
		}
		tag := etag.Load().(string)
		if tag != "" {
			quoted := `"` + tag + r.URL.Path + `"`
			w.Header().Set("ETag", quoted)
			if r.Header.Get("If-None-Match") == quoted {
				w.WriteHeader(http.StatusNotModified)
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"APIGroupList","groups":[]}`))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestProbeDiscoveryETags(t *testing.T) {
	var etag atomic.Value
	etag.Store("v1")
	client := restClientFor(t, etagServer(t, &etag, http.StatusOK).URL)

	tags, unchanged, err := ProbeDiscoveryETags(t.Context(), client, DiscoveryETags{})
	if err != nil || unchanged || tags != (DiscoveryETags{`"v1/api"`, `"v1/apis"`}) {
		t.Fatalf("first probe: got %q unchanged=%v err=%v, want both ETags, changed", tags, unchanged, err)
	}
	again, unchanged, err := ProbeDiscoveryETags(t.Context(), client, tags)
	if err != nil || !unchanged || again != tags {
		t.Fatalf("same documents: got %q unchanged=%v err=%v, want unchanged", again, unchanged, err)
	}
	etag.Store("v2")
	moved, unchanged, err := ProbeDiscoveryETags(t.Context(), client, tags)
	if err != nil || unchanged || moved != (DiscoveryETags{`"v2/api"`, `"v2/apis"`}) {
		t.Fatalf("changed documents: got %q unchanged=%v err=%v, want the new ETags, changed", moved, unchanged, err)
	}

	// A server without ETags (legacy discovery) is never unchanged.
	etag.Store("")
	none, unchanged, err := ProbeDiscoveryETags(t.Context(), client, moved)
	if err != nil || unchanged || none.Complete() {
		t.Fatalf("no ETags: got %q unchanged=%v err=%v, want incomplete, changed", none, unchanged, err)
	}
	if _, unchanged, _ := ProbeDiscoveryETags(t.Context(), client, none); unchanged {
		t.Fatal("no ETags: an incomplete set must never count as unchanged")
	}

	// An error answer is an error, not "unchanged".
	failing := restClientFor(t, etagServer(t, &etag, http.StatusInternalServerError).URL)
	if _, unchanged, err := ProbeDiscoveryETags(t.Context(), failing, tags); err == nil || unchanged {
		t.Fatalf("500: got unchanged=%v err=%v, want an error", unchanged, err)
	}
	// A client that is not a REST client (a fake) knows nothing.
	if tags, unchanged, err := ProbeDiscoveryETags(t.Context(), nil, tags); err != nil || unchanged || tags.Complete() {
		t.Fatalf("nil client: got %q unchanged=%v err=%v", tags, unchanged, err)
	}
}

// countingDiscovery counts full discoveries.
type countingDiscovery struct {
	discovery.DiscoveryInterface
	full atomic.Int32
}

func (d *countingDiscovery) ServerGroupsAndResources() ([]*metav1.APIGroup, []*metav1.APIResourceList, error) {
	d.full.Add(1)
	return d.DiscoveryInterface.ServerGroupsAndResources()
}

// Without a REST client to probe (the fake), every period discovers in full,
// as before the cache.
func TestAPICacheWithoutETagsDiscoversEveryTime(t *testing.T) {
	d := &countingDiscovery{DiscoveryInterface: fake.NewClientset().Discovery()}
	var c apiCache
	for range 3 {
		if _, reused, err := c.discoverAPIs(t.Context(), d); err != nil || reused {
			t.Fatalf("reused=%v err=%v, want a full discovery", reused, err)
		}
	}
	if got := d.full.Load(); got != 3 {
		t.Fatalf("full discoveries: got %d, want 3", got)
	}
}

func TestNeedVersion(t *testing.T) {
	cases := []struct {
		name                                 string
		known, probeFailed, discoveryChanged bool
		periods                              int
		want                                 bool
	}{
		{"nothing known yet", false, false, false, 0, true},
		{"known, nothing happened", true, false, false, 1, false},
		{"known, just below the bound", true, false, false, versionEvery - 1, false},
		{"the bound reached", true, false, false, versionEvery, true},
		{"the probe failed since (a restart, maybe an upgrade)", true, true, false, 1, true},
		{"the discovery documents changed", true, false, true, 1, true},
	}
	for _, tc := range cases {
		if got := NeedVersion(tc.known, tc.probeFailed, tc.discoveryChanged, tc.periods); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

// discoveryMember plays a member apiserver for whole status rounds: /readyz,
// kube-system, /version and legacy discovery (/api, /api/v1, /apis) whose
// /api and /apis carry an ETag and answer a matching If-None-Match with 304.
type discoveryMember struct {
	readyz                  atomic.Int32
	versions, fullDiscovery atomic.Int32
}

func (m *discoveryMember) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	json := func(body string) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}
	switch r.URL.Path {
	case "/readyz":
		w.WriteHeader(int(m.readyz.Load()))
	case "/api/v1/namespaces/kube-system":
		json(`{"kind":"Namespace","apiVersion":"v1","metadata":{"name":"kube-system","uid":"member-uid"}}`)
	case "/version":
		m.versions.Add(1)
		json(`{"gitVersion":"v1.36.0"}`)
	case "/api", "/apis":
		w.Header().Set("ETag", `"`+r.URL.Path+`-1"`)
		if r.Header.Get("If-None-Match") == `"`+r.URL.Path+`-1"` {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		if r.URL.Path == "/api" {
			json(`{"kind":"APIVersions","versions":["v1"]}`)
		} else {
			json(`{"kind":"APIGroupList","groups":[]}`)
		}
	case "/api/v1": // only a full discovery reads the resources
		m.fullDiscovery.Add(1)
		json(`{"kind":"APIResourceList","groupVersion":"v1","resources":[{"name":"pods","kind":"Pod","namespaced":true,"verbs":["get"]}]}`)
	default:
		http.NotFound(w, r)
	}
}

// An idle member costs the leader a /readyz, two 304s and, once in
// versionEvery periods, a /version per period: the documents are parsed once,
// the version read again at the bound and right after the apiserver probe
// failed (a restart may be an upgrade). The status holds both throughout.
func TestIdleSyncsReuseAPIsAndVersion(t *testing.T) {
	member := &discoveryMember{}
	member.readyz.Store(http.StatusOK)
	server := httptest.NewServer(member)
	defer server.Close()
	memberKube := kubernetes.NewForConfigOrDie(&rest.Config{Host: server.URL})
	hub := flotillafake.NewSimpleClientset(&clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "member1"}})
	clock := clocktesting.NewFakeClock(time.Date(2026, 12, 7, 1, 0, 0, 0, time.UTC))
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	c := NewController(hub, memberKube, corelisters.NewNodeLister(indexer), corelisters.NewPodLister(indexer),
		[]cache.InformerSynced{func() bool { return true }}, NewGate(),
		Options{ClusterName: "member1", Period: 10 * time.Second, Clock: clock})
	sync := func() {
		clock.Step(10 * time.Second)
		c.Sync(t.Context())
	}
	sync() // sets spec.id
	sync() // first report: full discovery, /version
	if got := mustGet(t, hub).Status; got.KubernetesVersion != "v1.36.0" || len(got.APIEnablements) != 1 {
		t.Fatalf("first report: version %q, %d API enablements", got.KubernetesVersion, len(got.APIEnablements))
	}
	if v, d := member.versions.Load(), member.fullDiscovery.Load(); v != 1 || d != 1 {
		t.Fatalf("first report: %d /version, %d full discoveries, want 1 and 1", v, d)
	}
	for range versionEvery {
		sync()
	}
	if v, d := member.versions.Load(), member.fullDiscovery.Load(); v != 2 || d != 1 {
		t.Fatalf("after %d idle periods: %d /version (want 2: the bound), %d full discoveries (want 1)", versionEvery, v, d)
	}
	member.readyz.Store(http.StatusServiceUnavailable)
	sync()
	member.readyz.Store(http.StatusOK)
	sync()
	if v := member.versions.Load(); v != 3 {
		t.Fatalf("after a failed probe: %d /version, want 3 (read again at once)", v)
	}
	if got := mustGet(t, hub).Status; got.KubernetesVersion != "v1.36.0" || len(got.APIEnablements) != 1 {
		t.Fatalf("idle reports: version %q, %d API enablements", got.KubernetesVersion, len(got.APIEnablements))
	}
}
