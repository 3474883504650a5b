package clustertaint

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/hub/hubmetrics"
)

func TestNoExecuteSince(t *testing.T) {
	seen := time.Unix(5000, 0)
	at := func(s int64) *metav1.Time { v := metav1.NewTime(time.Unix(s, 0)); return &v }
	for _, tc := range []struct {
		name   string
		taints []corev1.Taint
		want   time.Time
		found  bool
	}{
		{"none", nil, time.Time{}, false},
		{"NoSchedule only", []corev1.Taint{{Key: "a", Effect: corev1.TaintEffectNoSchedule, TimeAdded: at(10)}}, time.Time{}, false},
		{"oldest NoExecute", []corev1.Taint{
			{Key: "a", Effect: corev1.TaintEffectNoSchedule, TimeAdded: at(10)},
			{Key: "b", Effect: corev1.TaintEffectNoExecute, TimeAdded: at(300)},
			{Key: "c", Effect: corev1.TaintEffectNoExecute, TimeAdded: at(200)},
		}, time.Unix(200, 0), true},
		{"no timeAdded counts from first seen", []corev1.Taint{{Key: "b", Effect: corev1.TaintEffectNoExecute}}, seen, true},
		{"timeAdded older than first seen wins", []corev1.Taint{
			{Key: "b", Effect: corev1.TaintEffectNoExecute},
			{Key: "c", Effect: corev1.TaintEffectNoExecute, TimeAdded: at(100)},
		}, time.Unix(100, 0), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, found := noExecuteSince(tc.taints, seen)
			if found != tc.found || !got.Equal(tc.want) {
				t.Errorf("noExecuteSince = %v, %v; want %v, %v", got, found, tc.want, tc.found)
			}
		})
	}
}

func TestNoExecuteMetricsFollowTaints(t *testing.T) {
	m := hubmetrics.New(prometheus.NewRegistry())
	added := metav1.NewTime(time.Unix(1000, 0))
	cl := func(name string, taints ...corev1.Taint) *clusterv1alpha1.Cluster {
		return &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: clusterv1alpha1.ClusterSpec{Taints: taints}}
	}
	seen := map[string]time.Time{}
	noExecuteMetrics(m, []*clusterv1alpha1.Cluster{
		cl("m1", corev1.Taint{Key: "cluster.flotilla.io/not-ready", Effect: corev1.TaintEffectNoExecute, TimeAdded: &added}),
		cl("m2", corev1.Taint{Key: "manual", Effect: corev1.TaintEffectNoExecute}),
		cl("m3"),
	}, seen, time.Unix(2000, 0))
	if got := noExecuteGaugeValue(t, m.NoExecuteSince.WithLabelValues("m1")); got != 1000 {
		t.Errorf("m1 since = %v, want 1000", got)
	}
	// A later pass keeps the first-seen time of a taint without timeAdded.
	noExecuteMetrics(m, []*clusterv1alpha1.Cluster{
		cl("m2", corev1.Taint{Key: "manual", Effect: corev1.TaintEffectNoExecute}),
		cl("m1"), cl("m3"),
	}, seen, time.Unix(3000, 0))
	if got := noExecuteGaugeValue(t, m.NoExecuteSince.WithLabelValues("m2")); got != 2000 {
		t.Errorf("m2 since = %v, want 2000 (first seen)", got)
	}
	// m1's taint is gone: its series is dropped; m3 never had one.
	ch := make(chan prometheus.Metric, 10)
	m.NoExecuteSince.Collect(ch)
	close(ch)
	if n := len(ch); n != 1 {
		t.Errorf("%d series, want 1 (m2 only)", n)
	}
}

// noExecuteGaugeValue reads a gauge (prometheus/testutil needs a module the
// repository's go.mod does not list).
func noExecuteGaugeValue(t *testing.T, g prometheus.Gauge) float64 {
	t.Helper()
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}
