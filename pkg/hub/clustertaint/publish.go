package clustertaint

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// GuardConfigMapName is the ConfigMap, in the hub's leader-election
// namespace, where the hub publishes the fleet guard's verdict for readers
// outside the hub process (kubectl flotilla clusters). The verdict
// otherwise lives only in the leader's memory, its metrics and events.
const GuardConfigMapName = "flotilla-fleet-guard"

// Keys of the guard ConfigMap's data.
const (
	GuardKeyMode     = "mode"
	GuardKeyNotReady = "notReady"
	GuardKeyTotal    = "total"
	// GuardKeyRegions is a JSON object: region name ("" for the clusters
	// without a region) to PublishedRegion.
	GuardKeyRegions = "regions"
	// GuardKeySince is when the hub reached this verdict (RFC 3339).
	GuardKeySince = "since"
)

// PublishedRegion is one region's verdict in the guard ConfigMap.
type PublishedRegion struct {
	Mode     string `json:"mode"`
	NotReady int    `json:"notReady"`
	Total    int    `json:"total"`
}

// PublishedGuard is the verdict as the guard ConfigMap carries it.
type PublishedGuard struct {
	Mode     string                     `json:"mode"`
	NotReady int                        `json:"notReady"`
	Total    int                        `json:"total"`
	Regions  map[string]PublishedRegion `json:"regions,omitempty"`
	Since    time.Time                  `json:"since"`
}

// GuardConfigMapData renders a verdict reached at since as ConfigMap data.
func GuardConfigMapData(s GuardState, since time.Time) map[string]string {
	regions := make(map[string]PublishedRegion, len(s.Regions))
	for name, r := range s.Regions {
		regions[name] = PublishedRegion(r)
	}
	rj, _ := json.Marshal(regions) // map keys are sorted: stable output
	return map[string]string{
		GuardKeyMode:     s.Mode,
		GuardKeyNotReady: strconv.Itoa(s.NotReady),
		GuardKeyTotal:    strconv.Itoa(s.Total),
		GuardKeyRegions:  string(rj),
		GuardKeySince:    since.UTC().Format(time.RFC3339),
	}
}

// ParseGuardConfigMap reads the verdict back from the ConfigMap's data.
// A missing mode is an error; other missing keys read as zero.
func ParseGuardConfigMap(data map[string]string) (PublishedGuard, error) {
	g := PublishedGuard{Mode: data[GuardKeyMode]}
	if g.Mode == "" {
		return g, fmt.Errorf("%s has no %q", GuardConfigMapName, GuardKeyMode)
	}
	g.NotReady, _ = strconv.Atoi(data[GuardKeyNotReady])
	g.Total, _ = strconv.Atoi(data[GuardKeyTotal])
	if r := data[GuardKeyRegions]; r != "" {
		if err := json.Unmarshal([]byte(r), &g.Regions); err != nil {
			return g, fmt.Errorf("%s %q: %w", GuardConfigMapName, GuardKeyRegions, err)
		}
	}
	g.Since, _ = time.Parse(time.RFC3339, data[GuardKeySince])
	return g, nil
}

// sameVerdict compares two ConfigMaps' data ignoring when the verdict was
// reached: a rewrite only to move the time would be a write per period.
func sameVerdict(a, b map[string]string) bool {
	strip := func(m map[string]string) map[string]string {
		m = maps.Clone(m)
		delete(m, GuardKeySince)
		return m
	}
	return maps.Equal(strip(a), strip(b))
}

// GuardPublisher writes the fleet guard's verdict to the ConfigMap
// GuardConfigMapName. It writes only when the verdict differs from what the
// ConfigMap holds (read from a watch of that one ConfigMap), and creates
// it again when it is missing, so a deleted ConfigMap comes back at the next
// evaluation and a steady fleet costs no writes. The write is made by a
// goroutine of its own, with the latest verdict submitted: the guard is
// evaluated on the cluster-taint controller's path to a NoExecute taint,
// which must not wait for a ConfigMap write (it did: one apiserver round
// trip before every failover's taint). Safe for concurrent use.
type GuardPublisher struct {
	client    kubernetes.Interface
	namespace string
	factory   informers.SharedInformerFactory
	lister    corelisters.ConfigMapNamespaceLister
	synced    cache.InformerSynced
	start     sync.Once
	// kick wakes the publishing goroutine; latest is the verdict it
	// writes next (when it was reached in at), guarded by mu.
	kick     chan struct{}
	mu       sync.Mutex
	latest   *GuardState
	latestAt time.Time
	// published, when set, is called after each publishing attempt (tests).
	published func(error)
}

// NewGuardPublisher returns a publisher writing to namespace (the hub's
// leader-election namespace). A nil publisher publishes nothing.
func NewGuardPublisher(client kubernetes.Interface, namespace string) *GuardPublisher {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", GuardConfigMapName).String()
		}))
	inf := factory.Core().V1().ConfigMaps()
	return &GuardPublisher{client: client, namespace: namespace, factory: factory, kick: make(chan struct{}, 1),
		lister: inf.Lister().ConfigMaps(namespace), synced: inf.Informer().HasSynced}
}

// Publish submits state for the ConfigMap and returns at once. It is
// called on every guard evaluation; the first call starts the watch and
// the publishing goroutine (both end with ctx), which writes the latest
// verdict submitted once the watch has synced. Verdicts submitted while a
// write is under way are coalesced: only the last one is written.
func (p *GuardPublisher) Publish(ctx context.Context, state GuardState) {
	if p == nil || !state.Evaluated {
		return
	}
	p.start.Do(func() {
		p.factory.Start(ctx.Done())
		go func() { <-ctx.Done(); p.factory.Shutdown() }()
		go p.run(ctx)
	})
	p.mu.Lock()
	p.latest, p.latestAt = &state, time.Now()
	p.mu.Unlock()
	select {
	case p.kick <- struct{}{}:
	default: // a wake-up is pending: it takes the latest verdict
	}
}

// run writes the latest submitted verdict on every wake-up until ctx is done.
func (p *GuardPublisher) run(ctx context.Context) {
	if !cache.WaitForCacheSync(ctx.Done(), p.synced) {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.kick:
		}
		p.mu.Lock()
		state, at := p.latest, p.latestAt
		p.latest = nil
		p.mu.Unlock()
		if state == nil {
			continue
		}
		err := p.publish(ctx, *state, at)
		switch {
		case apierrors.IsNotFound(err):
			// No such namespace (a hub run outside its Deployment, as in
			// tests): nothing to publish to, and nothing wrong with the hub.
			klog.FromContext(ctx).V(4).Info("Not publishing the fleet guard verdict: no namespace", "namespace", p.namespace)
		case err != nil:
			klog.FromContext(ctx).Error(err, "Publishing the fleet guard verdict", "configMap", klog.KRef(p.namespace, GuardConfigMapName))
		}
		if p.published != nil {
			p.published(err)
		}
	}
}

func (p *GuardPublisher) publish(ctx context.Context, state GuardState, now time.Time) error {
	data := GuardConfigMapData(state, now)
	cur, err := p.lister.Get(GuardConfigMapName)
	if apierrors.IsNotFound(err) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: GuardConfigMapName, Namespace: p.namespace,
			Labels: map[string]string{"app.kubernetes.io/part-of": "flotilla", "app.kubernetes.io/managed-by": "flotilla-hub"}},
			Data: data}
		_, err = p.client.CoreV1().ConfigMaps(p.namespace).Create(ctx, cm, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil // our own create, not yet in the cache
		}
		return err
	}
	if err != nil {
		return err
	}
	if sameVerdict(cur.Data, data) {
		return nil
	}
	next := cur.DeepCopy()
	next.Data = data
	_, err = p.client.CoreV1().ConfigMaps(p.namespace).Update(ctx, next, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		return nil // the cache is behind; the next evaluation compares again
	}
	return err
}
