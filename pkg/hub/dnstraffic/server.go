// Package dnstraffic is the hub's DNS traffic manager: an authoritative DNS
// server that answers for every MultiClusterIngress host with the addresses
// in the MCI's status.loadBalancer. The MCI controller writes there only the
// clusters that should get traffic (Ready and not blocked by a Remedy), so
// pointing a delegation at this server moves clients off a failed or blocked
// cluster within one short TTL, with no external DNS provider.
//
// Each host has one owner, the oldest MCI that names it among those whose
// namespace may (Owners, DomainRules), decided on the host's canonical form
// (pkg/hostnames); only the owner's addresses are served for it, so a
// tenant cannot add addresses to another tenant's host. Wildcards answer
// as RFC 4592 says, as in any provider's zone. ANY queries get one RRset
// (RFC 8482).
//
// It only reads the API (an MCI informer), so it runs on every hub replica,
// not only the leader, and all replicas answer the same; a resolver can list
// them all as name servers.
//
// Intended hub flags (wired in the hub's main package):
//
//	--dns-traffic-address       ""    UDP+TCP address to serve on, e.g. ":5353"; empty disables the server
//	--dns-traffic-zones         []    zones answered for (comma-separated); empty: every MCI host is its own zone apex
//	--dns-traffic-ttl           5s    TTL of answers and of negative answers (SOA minimum)
//	--dns-traffic-max-in-flight 1024  queries handled concurrently; excess UDP queries are dropped and counted
//	--ingress-host-namespaces   []    DOMAIN=NS[,NS...]: only these namespaces may claim hosts within DOMAIN (DomainRules)
//	--ingress-host-subtree-ownership false  an exact host's owner owns the names beneath it against other namespaces (DomainRules.Subtrees)
package dnstraffic

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/netutil"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/flotilla-io/flotilla/pkg/hostnames"
)

// Options configure the server. Zero values take the defaults.
type Options struct {
	// Address is where to listen, on both UDP and TCP ("127.0.0.1:5353";
	// port 0 picks one port free on both).
	Address string
	// Zones are the zones answered for. Empty: every MCI host is its own
	// zone apex. Set: names outside them are REFUSED and MCI hosts outside
	// them are ignored (and logged).
	Zones []string
	// TTL of every record, and the negative-caching TTL (default 5s): short,
	// so failover reaches clients quickly.
	TTL time.Duration
	// MaxInFlight bounds the queries handled at once (default 1024). Excess
	// UDP queries are dropped and counted; TCP queries wait up to
	// TCPReadTimeout for a slot (connections are bounded by MaxTCPConns).
	MaxInFlight int
	// MaxTCPConns bounds open TCP connections (default 256); further ones
	// wait in the listen backlog.
	MaxTCPConns int
	// MaxTCPQueries is the queries served per TCP connection before it is
	// closed (default 128).
	MaxTCPQueries int
	// TCPReadTimeout is the time to read a TCP query (default 2s).
	TCPReadTimeout time.Duration
	// TCPWriteTimeout is the time to write a TCP reply (default 2s).
	TCPWriteTimeout time.Duration
	// TCPIdleTimeout is how long an idle TCP connection is kept between
	// queries (default 8s, RFC 7766's "a few seconds").
	TCPIdleTimeout time.Duration
	// HostNamespaces say which namespaces may claim which domains
	// (--ingress-host-namespaces); the zero value lets any namespace claim
	// any host.
	HostNamespaces DomainRules
	// Metrics, if nil, are created on a registry nobody serves.
	Metrics *Metrics
	// FreshnessCheck, if set, is a quorum read of the host apiserver with
	// the informer's client (a LIST of one MCI): while it fails the view
	// is stale (see freshness). Nil: the view is always taken as current.
	FreshnessCheck func(context.Context) error
	// FreshnessInterval is how often FreshnessCheck runs, and its timeout
	// (default 5s).
	FreshnessInterval time.Duration
	// StaleHorizon is how long the server keeps answering from a stale
	// view (default 1h); past it, every query is answered SERVFAIL and
	// Ready fails.
	StaleHorizon time.Duration
	// Clock is the freshness clock (default: the real one).
	Clock clock.Clock
}

// Server is the DNS traffic manager.
type Server struct {
	opts    Options
	table   *Table
	metrics *Metrics
	// sem holds one token per query being handled.
	sem chan struct{}
	// rot numbers the queries: it picks among a host's alternative
	// answers and rotates the records of one.
	rot atomic.Uint64
	// addr is the bound address, "" until listening.
	addr atomic.Pointer[string]
	log  logr.Logger
	// fresh says how current the MCI view is.
	fresh *freshness

	// testHook, if set, runs while a query holds its in-flight slot.
	testHook func()
}

// New validates opts and registers on the MCI informer (from the flotilla
// informer factory; the factory starts it, on every replica).
func New(opts Options, mcis cache.SharedIndexInformer) (*Server, error) {
	if opts.Address == "" {
		return nil, errors.New("dns traffic manager: no address")
	}
	if _, _, err := net.SplitHostPort(opts.Address); err != nil {
		return nil, fmt.Errorf("dns traffic manager: address %q: %w", opts.Address, err)
	}
	zones := make([]string, 0, len(opts.Zones))
	for _, z := range opts.Zones {
		if z == "." {
			zones = append(zones, z)
			continue
		}
		n, err := hostnames.Canonical(z)
		if err != nil || hostnames.IsWildcard(n) {
			return nil, fmt.Errorf("dns traffic manager: zone %q is not a DNS name", z)
		}
		zones = append(zones, fqdn(n))
	}
	if opts.TTL < 0 || opts.TTL > 24*time.Hour {
		return nil, fmt.Errorf("dns traffic manager: TTL %v out of range", opts.TTL)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	defInt := func(d *int, v int) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&opts.TTL, 5*time.Second)
	def(&opts.TCPReadTimeout, 2*time.Second)
	def(&opts.TCPWriteTimeout, 2*time.Second)
	def(&opts.TCPIdleTimeout, 8*time.Second)
	if opts.StaleHorizon < 0 || opts.StaleHorizon > maxStaleHorizon {
		return nil, fmt.Errorf("dns traffic manager: stale horizon %v out of range (0 to %v)", opts.StaleHorizon, maxStaleHorizon)
	}
	def(&opts.FreshnessInterval, 5*time.Second)
	def(&opts.StaleHorizon, time.Hour)
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	defInt(&opts.MaxInFlight, 1024)
	defInt(&opts.MaxTCPConns, 256)
	defInt(&opts.MaxTCPQueries, 128)
	if opts.Metrics == nil {
		opts.Metrics = NewMetrics(prometheus.NewRegistry())
	}
	t, err := NewTable(mcis, zones, opts.TTL, opts.HostNamespaces, opts.Metrics)
	if err != nil {
		return nil, err
	}
	s := &Server{opts: opts, table: t, metrics: opts.Metrics, sem: make(chan struct{}, opts.MaxInFlight), log: klog.Background(),
		fresh: &freshness{check: opts.FreshnessCheck, interval: opts.FreshnessInterval, horizon: opts.StaleHorizon, clock: opts.Clock, metrics: opts.Metrics}}
	empty := ""
	s.addr.Store(&empty)
	return s, nil
}

// HasSynced is true once the server answers from a synced MCI cache.
func (s *Server) HasSynced() bool { return s.table.HasSynced() }

// Ready is nil once the server listens and answers from a synced cache: a
// readiness check, so a replica not yet answering gets no DNS traffic.
func (s *Server) Ready() error {
	if s.Addr() == "" {
		return errors.New("dns traffic manager: not listening")
	}
	if !s.HasSynced() {
		return errors.New("dns traffic manager: MultiClusterIngress cache not synced")
	}
	if st := s.fresh.state(); st.Expired {
		return fmt.Errorf("dns traffic manager: host apiserver unanswered for %s, past the stale horizon %s", st.Age.Truncate(time.Second), s.opts.StaleHorizon)
	}
	return nil
}

// maxStaleHorizon bounds --dns-traffic-stale-horizon: a week-old view is not
// a view.
const maxStaleHorizon = 7 * 24 * time.Hour

// Addr is the address listened on (UDP and TCP), "" until Run binds it.
func (s *Server) Addr() string { return *s.addr.Load() }

// Snapshot is the snapshot being served.
func (s *Server) Snapshot() *Snapshot { return s.table.Snapshot() }

// Run listens on UDP and TCP, serves until ctx is done and shuts down. It
// returns an error if it cannot bind or a listener fails.
func (s *Server) Run(ctx context.Context) error {
	s.log = klog.FromContext(ctx).WithName("dnstraffic")
	pc, ln, err := listen(s.opts.Address)
	if err != nil {
		return fmt.Errorf("dns traffic manager: listen on %s: %w", s.opts.Address, err)
	}
	ln = &deadlineListener{Listener: netutil.LimitListener(ln, s.opts.MaxTCPConns), write: s.opts.TCPWriteTimeout}

	var started sync.WaitGroup
	started.Add(2)
	idle := s.opts.TCPIdleTimeout
	servers := []*dns.Server{
		{PacketConn: pc, Handler: s, UDPSize: 4096, ReadTimeout: s.opts.TCPReadTimeout,
			MsgAcceptFunc: dns.DefaultMsgAcceptFunc, NotifyStartedFunc: started.Done},
		{Listener: ln, Handler: s, ReadTimeout: s.opts.TCPReadTimeout, IdleTimeout: func() time.Duration { return idle },
			MaxTCPQueries: s.opts.MaxTCPQueries, MsgAcceptFunc: dns.DefaultMsgAcceptFunc, NotifyStartedFunc: started.Done},
	}
	errc := make(chan error, len(servers))
	for _, srv := range servers {
		go func() { errc <- srv.ActivateAndServe() }()
	}
	// Shutdown before a server has started is a no-op that leaves it
	// running, so wait for both (or a failure) first.
	startedc := make(chan struct{})
	go func() { started.Wait(); close(startedc) }()
	pending := len(servers)
	var runErr error
	select {
	case <-startedc:
	case runErr = <-errc:
		pending--
	}

	tableCtx, stopTable := context.WithCancel(ctx)
	tableDone := make(chan struct{}, 2)
	go func() { defer func() { tableDone <- struct{}{} }(); s.table.Run(tableCtx) }()
	go func() { defer func() { tableDone <- struct{}{} }(); s.fresh.run(tableCtx, s.logFreshness) }()

	if runErr == nil {
		addr := pc.LocalAddr().String()
		s.addr.Store(&addr)
		s.log.Info("DNS traffic manager serving", "address", addr, "zones", s.opts.Zones, "ttl", s.opts.TTL)
		select {
		case <-ctx.Done():
		case runErr = <-errc:
			pending--
		}
	}
	empty := ""
	s.addr.Store(&empty)

	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	for _, srv := range servers {
		_ = srv.ShutdownContext(shutdownCtx) // "not started" for the one that failed
	}
	_ = pc.Close()
	_ = ln.Close()
	for ; pending > 0; pending-- {
		if err := <-errc; err != nil && runErr == nil && ctx.Err() == nil {
			runErr = err
		}
	}
	stopTable()
	<-tableDone
	<-tableDone
	if runErr != nil {
		return fmt.Errorf("dns traffic manager: %w", runErr)
	}
	return nil
}

// listen binds UDP and TCP on the same address; with port 0, on the same
// free port.
func listen(addr string) (net.PacketConn, net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, nil, err
	}
	for attempt := 0; ; attempt++ {
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			return nil, nil, err
		}
		tcpAddr := addr
		if port == "0" {
			tcpAddr = net.JoinHostPort(host, strconv.Itoa(pc.LocalAddr().(*net.UDPAddr).Port))
		}
		ln, err := net.Listen("tcp", tcpAddr)
		if err == nil {
			return pc, ln, nil
		}
		_ = pc.Close()
		if port != "0" || attempt == 10 {
			return nil, nil, err
		}
	}
}

// deadlineListener gives every TCP reply a write deadline: miekg/dns sets
// read deadlines only, and a client that stops reading must not pin a
// connection slot.
type deadlineListener struct {
	net.Listener
	write time.Duration
}

func (l *deadlineListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &deadlineConn{Conn: c, write: l.write}, nil
}

type deadlineConn struct {
	net.Conn
	write time.Duration
}

func (c *deadlineConn) Write(b []byte) (int, error) {
	if err := c.SetWriteDeadline(time.Now().Add(c.write)); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}

// ServeDNS implements dns.Handler.
func (s *Server) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	start := time.Now()
	_, tcp := w.RemoteAddr().(*net.TCPAddr)
	if !s.acquire(tcp) {
		s.metrics.dropped.Inc()
		if tcp {
			_ = w.Close()
		}
		return
	}
	defer func() { <-s.sem }()
	defer func() {
		if r := recover(); r != nil {
			s.metrics.Panics.Inc()
			s.metrics.results[dns.RcodeServerFailure].Inc()
			s.log.Error(fmt.Errorf("panic: %v", r), "DNS handler panicked")
			s.writeServFail(w, req)
		}
	}()
	if s.testHook != nil {
		s.testHook()
	}

	n := s.rot.Add(1)
	resp := s.table.Snapshot().AnswerFor(req, n)
	if st := s.fresh.state(); st.Stale {
		markStale(resp, st)
		if !st.Expired {
			s.metrics.StaleAnswers.Inc()
		}
	}
	rotate(resp.Answer, n)
	size := dns.MaxMsgSize
	if !tcp {
		size = udpSize(req)
	}
	resp.Truncate(size)
	_ = w.WriteMsg(resp) // the client is gone or too slow; nothing to do
	s.metrics.observe(resp)
	s.metrics.RequestDuration.Observe(time.Since(start).Seconds())
}

// logFreshness logs each change between a current and a stale view.
func (s *Server) logFreshness(stale bool, err error, age time.Duration) {
	if stale {
		s.log.Info("DNS traffic view is stale: the host apiserver does not answer; answering from the last view, marked stale, until the horizon",
			"error", err, "unansweredFor", age.Truncate(time.Second), "staleHorizon", s.opts.StaleHorizon)
		return
	}
	s.log.Info("DNS traffic view is current again: the host apiserver answers")
}

// acquire takes an in-flight slot: never waits for UDP (a resolver retries
// a dropped query, and queueing would only answer it after it gave up).
func (s *Server) acquire(tcp bool) bool {
	select {
	case s.sem <- struct{}{}:
		return true
	default:
	}
	if !tcp {
		return false
	}
	t := time.NewTimer(s.opts.TCPReadTimeout)
	defer t.Stop()
	select {
	case s.sem <- struct{}{}:
		return true
	case <-t.C:
		return false
	}
}

// rotate turns the answer round by one per query so clients that take the
// first address spread across clusters.
func rotate(rrs []dns.RR, seq uint64) {
	if n := len(rrs); n > 1 {
		k := int(seq % uint64(n))
		tmp := make([]dns.RR, n)
		copy(tmp, rrs[k:])
		copy(tmp[n-k:], rrs[:k])
		copy(rrs, tmp)
	}
}

func (s *Server) writeServFail(w dns.ResponseWriter, req *dns.Msg) {
	defer func() { _ = recover() }()
	m := &dns.Msg{}
	m.Id, m.Response, m.Opcode, m.Rcode = req.Id, true, req.Opcode, dns.RcodeServerFailure
	_ = w.WriteMsg(m)
}

// udpSize is the largest UDP reply the client accepts (RFC 6891), capped at
// maxUDPSize.
func udpSize(req *dns.Msg) int {
	size := dns.MinMsgSize
	if o := req.IsEdns0(); o != nil && int(o.UDPSize()) > size {
		size = int(o.UDPSize())
	}
	return min(size, maxUDPSize)
}
