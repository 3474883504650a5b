package dnstraffic

import (
	"context"
	"maps"
	"net"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	networkingv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/networking/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned/fake"
	flotillainformers "github.com/flotilla-io/flotilla/pkg/generated/informers"
)

// newMCI is an MCI with the given hosts and status addresses (IPs or, when
// not parseable as an IP, hostnames).
func newMCI(name string, hosts []string, addrs ...string) *networkingv1alpha1.MultiClusterIngress {
	m := &networkingv1alpha1.MultiClusterIngress{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}
	for _, h := range hosts {
		m.Spec.Rules = append(m.Spec.Rules, networkingv1.IngressRule{Host: h})
	}
	for _, a := range addrs {
		if net.ParseIP(a) != nil {
			m.Status.LoadBalancer.Ingress = append(m.Status.LoadBalancer.Ingress, networkingv1.IngressLoadBalancerIngress{IP: a})
		} else {
			m.Status.LoadBalancer.Ingress = append(m.Status.LoadBalancer.Ingress, networkingv1.IngressLoadBalancerIngress{Hostname: a})
		}
	}
	return m
}

// fixture is a server fed by a fake clientset through a real informer.
type fixture struct {
	client  *fake.Clientset
	server  *Server
	metrics *Metrics
	reg     *prometheus.Registry
	cancel  context.CancelFunc
	runErr  chan error
	factory flotillainformers.SharedInformerFactory
}

// startFixture starts the informer and the server and waits until it is
// ready (or fails the test).
func startFixture(t *testing.T, opts Options, objs ...runtime.Object) *fixture {
	t.Helper()
	f := &fixture{client: fake.NewSimpleClientset(objs...), reg: prometheus.NewRegistry(), runErr: make(chan error, 1)}
	f.metrics = NewMetrics(f.reg)
	opts.Metrics = f.metrics
	if opts.Address == "" {
		opts.Address = "127.0.0.1:0"
	}
	f.factory = flotillainformers.NewSharedInformerFactory(f.client, 0)
	s, err := New(opts, f.factory.Networking().V1alpha1().MultiClusterIngresses().Informer())
	if err != nil {
		t.Fatal(err)
	}
	f.server = s
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	f.factory.Start(ctx.Done())
	go func() { f.runErr <- s.Run(ctx) }()
	waitFor(t, 10*time.Second, "server ready", func() bool { return s.Ready() == nil })
	t.Cleanup(f.stop)
	return f
}

// stop cancels the server and waits for Run and the informers to return.
func (f *fixture) stop() {
	if f.cancel == nil {
		return
	}
	f.cancel()
	f.cancel = nil
	<-f.runErr
	f.factory.Shutdown()
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func query(name string, qtype uint16) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	return m
}

// fakeWriter records what the handler writes.
type fakeWriter struct {
	tcp    bool
	msgs   []*dns.Msg
	packed [][]byte
	closed bool
}

func (w *fakeWriter) LocalAddr() net.Addr {
	if w.tcp {
		return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 53}
	}
	return &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 53}
}

func (w *fakeWriter) RemoteAddr() net.Addr {
	if w.tcp {
		return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
	}
	return &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
}

func (w *fakeWriter) WriteMsg(m *dns.Msg) error {
	b, err := m.Pack()
	if err != nil {
		return err
	}
	w.msgs = append(w.msgs, m)
	w.packed = append(w.packed, b)
	return nil
}

func (w *fakeWriter) Write(b []byte) (int, error) { w.packed = append(w.packed, b); return len(b), nil }
func (w *fakeWriter) Close() error                { w.closed = true; return nil }
func (w *fakeWriter) TsigStatus() error           { return nil }
func (w *fakeWriter) TsigTimersOnly(bool)         {}
func (w *fakeWriter) Hijack()                     {}

// newHandlerOnly is a server whose table is synced from objs, without
// listening: for calling ServeDNS directly.
func newHandlerOnly(t *testing.T, opts Options, objs ...runtime.Object) *Server {
	t.Helper()
	factory := flotillainformers.NewSharedInformerFactory(fake.NewSimpleClientset(objs...), 0)
	if opts.Address == "" {
		opts.Address = "127.0.0.1:0"
	}
	if opts.Metrics == nil {
		opts.Metrics = NewMetrics(prometheus.NewRegistry())
	}
	s, err := New(opts, factory.Networking().V1alpha1().MultiClusterIngresses().Informer())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() { s.table.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done; factory.Shutdown() })
	waitFor(t, 10*time.Second, "table synced", s.HasSynced)
	return s
}

// counterValues is a counter vec's values by its single label.
func counterValues(t *testing.T, vec *prometheus.CounterVec) map[string]float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 64)
	go func() { vec.Collect(ch); close(ch) }()
	out := map[string]float64{}
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatal(err)
		}
		out[d.GetLabel()[0].GetValue()] = d.GetCounter().GetValue()
	}
	return out
}

// settledCounterValues is counterValues once two reads 200 ms apart agree
// (within 10 s).
func settledCounterValues(t *testing.T, vec *prometheus.CounterVec) map[string]float64 {
	t.Helper()
	prev := counterValues(t, vec)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
		cur := counterValues(t, vec)
		if maps.Equal(prev, cur) {
			return cur
		}
		prev = cur
	}
	t.Fatalf("DNS query counters did not settle: %v", prev)
	return nil
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var d dto.Metric
	if err := c.Write(&d); err != nil {
		t.Fatal(err)
	}
	return d.GetCounter().GetValue()
}
