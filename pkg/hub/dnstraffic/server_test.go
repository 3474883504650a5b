package dnstraffic

import (
	"context"
	"encoding/binary"
	"math/rand"
	"net"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// exchange asks the server over net ("udp" or "tcp"), retrying a lost UDP
// reply until the deadline.
func exchange(t *testing.T, network, addr string, req *dns.Msg) *dns.Msg {
	t.Helper()
	c := &dns.Client{Net: network, Timeout: 500 * time.Millisecond}
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, _, err := c.Exchange(req, addr)
		if err == nil {
			return resp
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s query %s: %v", network, req.Question[0].Name, err)
		}
	}
}

func addrsOf(resp *dns.Msg) []string {
	var out []string
	for _, rr := range resp.Answer {
		if a, ok := rr.(*dns.A); ok {
			out = append(out, a.A.String())
		}
	}
	slices.Sort(out)
	return out
}

func assertWeb(t *testing.T, addr string, want ...string) {
	t.Helper()
	for _, network := range []string{"udp", "tcp"} {
		resp := exchange(t, network, addr, query("web.example.com.", dns.TypeA))
		if got := addrsOf(resp); resp.Rcode != dns.RcodeSuccess || !resp.Authoritative || !slices.Equal(got, want) {
			t.Fatalf("%s: rcode %s AA %v addresses %v, want NOERROR AA %v", network, dns.RcodeToString[resp.Rcode], resp.Authoritative, got, want)
		}
	}
}

func TestServerLoopback(t *testing.T) {
	baseline := runtime.NumGoroutine()
	f := startFixture(t, Options{MaxInFlight: 8, TCPIdleTimeout: 200 * time.Millisecond},
		newMCI("web", []string{"web.example.com"}, "10.0.0.1", "10.0.0.2"))
	addr := f.server.Addr()
	assertWeb(t, addr, "10.0.0.1", "10.0.0.2")

	t.Run("malformed UDP", func(t *testing.T) {
		conn, err := net.Dial("udp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		rnd := rand.New(rand.NewSource(1))
		for i := range 500 {
			b := make([]byte, rnd.Intn(600))
			rnd.Read(b)
			if i%2 == 0 && len(b) >= 12 {
				b[2] &^= 0x80 // a query, so it gets past the QR check
			}
			_, _ = conn.Write(b)
		}
		for _, s := range fuzzSeeds() {
			_, _ = conn.Write(s)
		}
		assertWeb(t, addr, "10.0.0.1", "10.0.0.2")
	})

	t.Run("malformed TCP", func(t *testing.T) {
		rnd := rand.New(rand.NewSource(2))
		send := func(payloads ...[]byte) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
			for _, p := range payloads {
				if _, err := conn.Write(p); err != nil {
					return // the server hung up: fine
				}
			}
		}
		framed := func(b []byte) []byte {
			return append(binary.BigEndian.AppendUint16(nil, uint16(len(b))), b...)
		}
		for range 50 {
			b := make([]byte, rnd.Intn(300))
			rnd.Read(b)
			send(framed(b))
		}
		for _, s := range fuzzSeeds() {
			send(framed(s))
		}
		send([]byte{0x01})                   // half a length
		send([]byte{0xff, 0xff, 1, 2, 3})    // length longer than the data
		send(framed(nil), framed([]byte{1})) // empty messages
		assertWeb(t, addr, "10.0.0.1", "10.0.0.2")
	})

	t.Run("flood", func(t *testing.T) {
		// The garbage connections above may still be answered (and
		// counted) for a moment: start from counters that have settled.
		before := settledCounterValues(t, f.metrics.Queries)
		const clients, perClient = 64, 313 // ~20k queries
		var sent, received, wrong atomic.Int64
		var wg sync.WaitGroup
		for c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				conn, err := net.Dial("udp", addr)
				if err != nil {
					t.Error(err)
					return
				}
				defer conn.Close()
				readDone := make(chan struct{})
				go func() {
					defer close(readDone)
					buf := make([]byte, 2048)
					for {
						// Stop once the server has gone quiet for a while;
						// the overall test deadline bounds this too.
						_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
						n, err := conn.Read(buf)
						if err != nil {
							return
						}
						resp := new(dns.Msg)
						if resp.Unpack(buf[:n]) != nil || resp.Rcode != dns.RcodeSuccess || len(addrsOf(resp)) != 2 {
							wrong.Add(1)
						}
						received.Add(1)
					}
				}()
				req := query("web.example.com.", dns.TypeA)
				for i := range perClient {
					req.Id = uint16(c*perClient + i)
					b, _ := req.Pack()
					if _, err := conn.Write(b); err == nil {
						sent.Add(1)
					}
				}
				<-readDone
			}()
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(2 * time.Minute):
			t.Fatal("flood did not finish")
		}
		after := counterValues(t, f.metrics.Queries)
		var answered float64
		for k, v := range after {
			if k != ResultDropped {
				answered += v - before[k]
			}
		}
		dropped := after[ResultDropped] - before[ResultDropped]
		t.Logf("sent %d, received %d, answered %v, dropped %v (the rest lost in socket buffers)", sent.Load(), received.Load(), answered, dropped)
		if wrong.Load() != 0 {
			t.Errorf("%d wrong replies", wrong.Load())
		}
		if received.Load() == 0 {
			t.Error("no replies at all")
		}
		if float64(received.Load()) > answered {
			t.Errorf("received %d replies but the server counted %v answers", received.Load(), answered)
		}
		if answered+dropped > float64(sent.Load()) {
			t.Errorf("answered %v + dropped %v > sent %d", answered, dropped, sent.Load())
		}
		if after["noerror"]-before["noerror"] != answered {
			t.Errorf("answers other than NOERROR during the flood: %v", after)
		}
		assertWeb(t, addr, "10.0.0.1", "10.0.0.2")
	})

	t.Run("status change", func(t *testing.T) {
		mcis := f.client.NetworkingV1alpha1().MultiClusterIngresses("default")
		mci, err := mcis.Get(context.Background(), "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		mci.Status.LoadBalancer.Ingress = newMCI("", nil, "10.0.0.2", "10.0.0.3").Status.LoadBalancer.Ingress
		mci.ResourceVersion = "2"
		if _, err := mcis.UpdateStatus(context.Background(), mci, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "new addresses served", func() bool {
			resp := exchange(t, "udp", addr, query("web.example.com.", dns.TypeA))
			return slices.Equal(addrsOf(resp), []string{"10.0.0.2", "10.0.0.3"})
		})
		assertWeb(t, addr, "10.0.0.2", "10.0.0.3")

		// Every cluster blocked: the name stays, with no addresses.
		mci.Status.LoadBalancer.Ingress = nil
		mci.ResourceVersion = "3"
		if _, err := mcis.UpdateStatus(context.Background(), mci, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "NODATA served", func() bool {
			resp := exchange(t, "udp", addr, query("web.example.com.", dns.TypeA))
			return resp.Rcode == dns.RcodeSuccess && len(resp.Answer) == 0 && len(resp.Ns) == 1
		})

		if err := mcis.Delete(context.Background(), "web", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "deleted host refused", func() bool {
			return exchange(t, "udp", addr, query("web.example.com.", dns.TypeA)).Rcode == dns.RcodeRefused
		})
	})

	f.stop()
	if f.server.Ready() == nil {
		t.Error("ready after stop")
	}
	waitFor(t, 10*time.Second, "goroutines back to baseline", func() bool {
		return runtime.NumGoroutine() <= baseline+3
	})
}

func TestServerNotSyncedIsServFail(t *testing.T) {
	// An informer that is never started: the server listens but must not
	// claim names it has not read yet.
	inf := cache.NewSharedIndexInformer(&cache.ListWatch{}, nil, 0, cache.Indexers{})
	s, err := New(Options{Address: "127.0.0.1:0"}, inf)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- s.Run(ctx) }()
	waitFor(t, 10*time.Second, "listening", func() bool { return s.Addr() != "" })
	if err := s.Ready(); err == nil || !strings.Contains(err.Error(), "not synced") {
		t.Errorf("Ready() = %v, want not synced", err)
	}
	if resp := exchange(t, "udp", s.Addr(), query("web.example.com.", dns.TypeA)); resp.Rcode != dns.RcodeServerFailure {
		t.Errorf("rcode %s, want SERVFAIL", dns.RcodeToString[resp.Rcode])
	}
	cancel()
	if err := <-runErr; err != nil {
		t.Errorf("Run: %v", err)
	}
}

func TestServerBindError(t *testing.T) {
	taken, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	inf := cache.NewSharedIndexInformer(&cache.ListWatch{}, nil, 0, cache.Indexers{})
	s, err := New(Options{Address: taken.LocalAddr().String()}, inf)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = s.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "listen on "+taken.LocalAddr().String()) {
		t.Errorf("Run on a taken port = %v, want a listen error", err)
	}
}
