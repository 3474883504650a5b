package app_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/hub/app"
	remedyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/remedy/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla-io/flotilla/pkg/testenv"
)

// The host apiserver goes away from the hub (its every connection dropped,
// the way an apiserver restart, an overloaded apiserver or a cut route
// look), with the hub leader-elected as it is installed. Before, the leader
// exited 4 s in ("lost the hub leader-election lease") and its DNS answers
// stopped with it. Now: it loses the Lease and stops deciding, but the
// process stays, stays ready, and answers every query from its last view,
// marked stale (RFC 8914) to EDNS clients and in its metrics; when the
// apiserver is back it leads again and acts on what was written meanwhile.
//
// Not parallel: the traffic tests share the package-level dnsAddr.
func TestHostAPIServerOutageStopsDecisionsNotDNS(t *testing.T) {
	dnsAddr = freeUDPAndTCPAddr(t)
	env := testenv.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opts := app.NewOptions()
	if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: opts.LeaderElection.ResourceNamespace}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	proxy := testenv.StartCutProxy(t, testenv.HostOf(t, env.Config.Host))
	opts.Kubeconfig = env.KubeconfigFor(t, proxy.ConfigVia(t, env.Config))
	opts.LeaderElection.LeaseDuration, opts.LeaderElection.RenewDeadline, opts.LeaderElection.RetryPeriod = 3*time.Second, 2*time.Second, 200*time.Millisecond
	health := testenv.FreeAddr(t)
	opts.MetricsBindAddress, opts.HealthProbeBindAddress = health, health
	opts.BindingStatusHold = time.Second
	opts.ClusterStartupGracePeriod, opts.ClusterMonitorGracePeriod = time.Hour, time.Hour // no agents: the test writes Ready
	opts.DNSTrafficAddress = dnsAddr
	var exited atomic.Pointer[error]
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := app.Run(ctx, opts)
		exited.Store(&err)
	}()
	t.Cleanup(func() { cancel(); <-done })
	stillRunning := func() {
		t.Helper()
		if err := exited.Load(); err != nil {
			t.Fatalf("the hub exited: %v", *err)
		}
	}

	fc := flotillaclient.NewForConfigOrDie(env.Config) // the test's own path to the apiserver is never cut
	ns := "default"
	startWebTraffic(t, ctx, fc, ns)
	both := []string{"10.0.1.1", "10.0.2.1"}
	waitUntil(t, "the hub leading and ready", func() (bool, error) {
		// The kubelet's readiness probe, before the outage.
		code, _, err := testenv.HTTPGet(ctx, health, "/readyz")
		return err == nil && code == http.StatusOK && hubMetric(health, "flotilla_hub_leader") == 1, nil
	})

	proxy.SetCut(true)
	t.Logf("%s: the hub cut off from its apiserver", time.Now().Format(time.StampMilli))
	// Every query during the outage gets both addresses; once the view is
	// known stale, EDNS clients are told so.
	sawStale := false
	waitUntil(t, "the hub to lose the Lease and call its view stale", func() (bool, error) {
		stillRunning()
		ips, ede := resolveEDNS(t, "web.example.com")
		if !slices.Equal(ips, both) {
			t.Fatalf("during the outage: web.example.com is %v, want %v", ips, both)
		}
		sawStale = sawStale || slices.Contains(ede, dns.ExtendedErrorCodeStaleAnswer)
		return sawStale && hubMetric(health, "flotilla_hub_leader") == 0 && hubMetric(health, "flotilla_hub_leadership_lost_total") == 1 &&
			hubMetric(health, "flotilla_dns_traffic_view_stale_seconds") > 0, nil
	})
	t.Logf("%s: lease lost, view stale", time.Now().Format(time.StampMilli))
	if code, body, err := testenv.HTTPGet(ctx, health, "/readyz"); err != nil || code != http.StatusOK {
		t.Fatalf("during the outage: /readyz %d %q %v, want 200", code, body, err)
	}
	t.Logf("%s: ready throughout", time.Now().Format(time.StampMilli))
	// Meanwhile an admin blocks member1's traffic: a hub that cannot see
	// it goes on answering its last view.
	upgrade := &remedyv1alpha1.Remedy{ObjectMeta: metav1.ObjectMeta{Name: "upgrade-member1"}, Spec: remedyv1alpha1.RemedySpec{
		ClusterAffinity: &remedyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1"}},
		Actions:         []remedyv1alpha1.RemedyAction{remedyv1alpha1.TrafficControl}}}
	if _, err := fc.RemedyV1alpha1().Remedies().Create(ctx, upgrade, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: Remedy written meanwhile", time.Now().Format(time.StampMilli))
	for range 20 {
		stillRunning()
		if ips, _ := resolveEDNS(t, "web.example.com"); !slices.Equal(ips, both) {
			t.Fatalf("during the outage, after the Remedy: web.example.com is %v, want the last view %v", ips, both)
		}
		time.Sleep(50 * time.Millisecond) // spreads the queries over a second; nothing waits on it
	}

	proxy.SetCut(false)
	t.Logf("%s: healed", time.Now().Format(time.StampMilli))
	waitUntil(t, "the hub leading again and acting on the Remedy", func() (bool, error) {
		stillRunning()
		ips, ede := resolveEDNS(t, "web.example.com")
		return hubMetric(health, "flotilla_hub_leader") == 1 && slices.Equal(ips, []string{"10.0.2.1"}) && len(ede) == 0 &&
			hubMetric(health, "flotilla_dns_traffic_view_stale_seconds") == 0, nil
	})
	waitActions(t, fc, "member1", "TrafficControl")
}

// resolveEDNS asks the hub's DNS traffic manager for name's A records
// (sorted) with EDNS, and returns them with the reply's Extended DNS Error
// codes.
func resolveEDNS(t *testing.T, name string) (ips []string, ede []uint16) {
	t.Helper()
	msg := new(dns.Msg)
	msg.SetQuestion(dns.Fqdn(name), dns.TypeA)
	msg.SetEdns0(1232, false)
	reply, _, err := (&dns.Client{Timeout: 2 * time.Second}).Exchange(msg, dnsAddr)
	if err != nil || reply.Rcode != dns.RcodeSuccess {
		return []string{fmt.Sprintf("error %v rcode %d", err, rcodeOf(reply))}, nil
	}
	for _, rr := range reply.Answer {
		if a, ok := rr.(*dns.A); ok {
			ips = append(ips, a.A.String())
		}
	}
	slices.Sort(ips)
	if o := reply.IsEdns0(); o != nil {
		for _, opt := range o.Option {
			if e, ok := opt.(*dns.EDNS0_EDE); ok {
				ede = append(ede, e.InfoCode)
			}
		}
	}
	return ips, ede
}

// hubMetric is the value of an unlabelled series on addr's /metrics, -1 if
// it cannot be read.
func hubMetric(addr, name string) float64 {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return -1
			}
			return f
		}
	}
	return -1
}
