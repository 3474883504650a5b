// Command dnstraffic measures the hub's DNS traffic manager on loopback: it
// serves N MultiClusterIngress hosts in-process (fed through a fake
// clientset and a real informer, as the hub feeds it) and runs C UDP clients,
// each sending a query and waiting for its reply, for D. It prints
// queries/s, latency percentiles, queries lost (no reply within 1s) and
// dropped (over --max-in-flight), and the process's heap and RSS. Client
// and server share the machine, so queries/s is a floor.
//
//	go run ./hack/bench/dnstraffic --hosts 100 --clients 32 --duration 10s
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand"
	"net"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	networkingv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/networking/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned/fake"
	flotillainformers "github.com/flotilla-io/flotilla/pkg/generated/informers"
	"github.com/flotilla-io/flotilla/pkg/hub/dnstraffic"
)

func main() {
	hosts := flag.Int("hosts", 100, "MultiClusterIngress hosts served (one MCI each, 3 serving clusters with 3 IPv4 and 1 IPv6 address; every other one weighted)")
	clients := flag.Int("clients", 32, "concurrent UDP clients")
	duration := flag.Duration("duration", 10*time.Second, "measuring time")
	maxInFlight := flag.Int("max-in-flight", 1024, "the server's --dns-traffic-max-in-flight")
	flag.Parse()
	if err := run(*hosts, *clients, *duration, *maxInFlight); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(hosts, clients int, duration time.Duration, maxInFlight int) error {
	var objs []k8sruntime.Object
	for i := range hosts {
		mci := &networkingv1alpha1.MultiClusterIngress{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: fmt.Sprintf("mci-%d", i)}}
		mci.Spec.Rules = []networkingv1.IngressRule{{Host: fmt.Sprintf("h%d.example.com", i)}}
		// As the MCI controller writes it: three serving clusters, their
		// addresses and weights; every other ingress weighted 50/30/20,
		// so half the queries take the weighted pick.
		for _, c := range []struct {
			name   string
			weight int32
			ips    []string
		}{{"member1", 50, []string{"10.0.0.1"}}, {"member2", 30, []string{"10.0.0.2", "2001:db8::1"}}, {"member3", 20, []string{"10.0.0.3"}}} {
			ct := networkingv1alpha1.ClusterTraffic{Name: c.name, Serving: true, Reason: networkingv1alpha1.TrafficReasonHealthy, Weight: 1}
			if i%2 == 1 {
				ct.Weight = c.weight
			}
			for _, ip := range c.ips {
				ct.Addresses = append(ct.Addresses, networkingv1.IngressLoadBalancerIngress{IP: ip})
				mci.Status.LoadBalancer.Ingress = append(mci.Status.LoadBalancer.Ingress, networkingv1.IngressLoadBalancerIngress{IP: ip})
			}
			mci.Status.Clusters = append(mci.Status.Clusters, ct)
		}
		if i%2 == 1 {
			mci.Spec.Strategy = &networkingv1alpha1.TrafficStrategy{Type: networkingv1alpha1.StrategyRoundRobin,
				Weight: map[string]int32{"member1": 50, "member2": 30, "member3": 20}}
		}
		objs = append(objs, mci)
	}
	reg := prometheus.NewRegistry()
	metrics := dnstraffic.NewMetrics(reg)
	factory := flotillainformers.NewSharedInformerFactory(fake.NewSimpleClientset(objs...), 0)
	srv, err := dnstraffic.New(dnstraffic.Options{Address: "127.0.0.1:0", MaxInFlight: maxInFlight, Metrics: metrics},
		factory.Networking().V1alpha1().MultiClusterIngresses().Informer())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())
	runErr := make(chan error, 1)
	go func() { runErr <- srv.Run(ctx) }()
	for deadline := time.Now().Add(30 * time.Second); srv.Ready() != nil; time.Sleep(10 * time.Millisecond) {
		select {
		case err := <-runErr:
			return err
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("server not ready: %v", srv.Ready())
		}
	}
	addr := srv.Addr()

	var (
		mu        sync.Mutex
		latencies []time.Duration
		lost      int
		wrong     int
	)
	stop := time.Now().Add(duration)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat, l, w, err := client(addr, hosts, int64(c), stop)
			if err != nil {
				fmt.Fprintln(os.Stderr, "client:", err)
			}
			mu.Lock()
			latencies = append(latencies, lat...)
			lost += l
			wrong += w
			mu.Unlock()
		}()
	}
	wg.Wait()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	goroutines := runtime.NumGoroutine()
	cancel()
	if err := <-runErr; err != nil {
		return err
	}
	factory.Shutdown()

	slices.Sort(latencies)
	pct := func(p float64) time.Duration {
		if len(latencies) == 0 {
			return 0
		}
		return latencies[min(len(latencies)-1, int(p*float64(len(latencies))))]
	}
	dropped := counter(reg, "flotilla_dns_traffic_queries_total", "dropped")
	fmt.Printf("hosts %d, clients %d, duration %v, GOMAXPROCS %d\n", hosts, clients, duration, runtime.GOMAXPROCS(0))
	fmt.Printf("answered %d (%.0f queries/s), lost %d, dropped by server %.0f, wrong %d\n",
		len(latencies), float64(len(latencies))/duration.Seconds(), lost, dropped, wrong)
	fmt.Printf("latency p50 %v, p99 %v, max %v\n", pct(0.50), pct(0.99), pct(1))
	fmt.Printf("heap in use %.1f MiB, goroutines at end of load %d, %s, %s\n",
		float64(ms.HeapInuse)/(1<<20), goroutines, procStatus("VmRSS"), procStatus("VmHWM"))
	return nil
}

// client sends one query at a time until stop, returning the latencies of
// the replies, the queries lost (no reply within 1s) and wrong replies.
func client(addr string, hosts int, seed int64, stop time.Time) ([]time.Duration, int, int, error) {
	conn, err := net.Dial("udp", addr)
	if err != nil {
		return nil, 0, 0, err
	}
	defer conn.Close()
	rnd := rand.New(rand.NewSource(seed))
	buf := make([]byte, 1500)
	var lat []time.Duration
	lost, wrong := 0, 0
	req := new(dns.Msg)
	for id := uint16(1); time.Now().Before(stop); id++ {
		req.SetQuestion(fmt.Sprintf("h%d.example.com.", rnd.Intn(hosts)), dns.TypeA)
		req.Id = id
		b, err := req.Pack()
		if err != nil {
			return lat, lost, wrong, err
		}
		start := time.Now()
		if _, err := conn.Write(b); err != nil {
			return lat, lost, wrong, err
		}
		_ = conn.SetReadDeadline(start.Add(time.Second))
		for {
			n, err := conn.Read(buf)
			if err != nil {
				lost++
				break
			}
			resp := new(dns.Msg)
			if resp.Unpack(buf[:n]) != nil || resp.Id != id {
				continue // a late reply to a lost query
			}
			lat = append(lat, time.Since(start))
			if resp.Rcode != dns.RcodeSuccess || len(resp.Answer) != 3 && len(resp.Answer) != 1 { // 1: a weighted host answers one cluster
				wrong++
			}
			break
		}
	}
	return lat, lost, wrong, nil
}

func counter(reg *prometheus.Registry, name, result string) float64 {
	mfs, err := reg.Gather()
	if err != nil {
		return -1
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if labelIs(m, "result", result) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func labelIs(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}

// procStatus is a line of /proc/self/status ("VmHWM: 12345 kB").
func procStatus(key string) string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return key + " unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, key+":") {
			return strings.Join(strings.Fields(line), " ")
		}
	}
	return key + " unknown"
}
