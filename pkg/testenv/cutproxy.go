package testenv

import (
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// CutProxy forwards TCP connections to a target until it is cut: then it
// drops every open connection and refuses every new one, as a component that
// lost its route to the target sees it, while every other path still works.
// Pointing one client at it (ConfigVia) cuts that client alone off an
// apiserver.
type CutProxy struct {
	target string
	ln     net.Listener

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
}

// StartCutProxy listens on a free loopback port and forwards to target
// (host:port) until the test ends.
func StartCutProxy(t testing.TB, target string) *CutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &CutProxy{target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	go p.serve()
	t.Cleanup(func() {
		_ = ln.Close()
		p.SetCut(true)
	})
	return p
}

// Addr is the proxy's host:port.
func (p *CutProxy) Addr() string { return p.ln.Addr().String() }

// ConfigVia is cfg with its server replaced by the proxy (the TLS name check
// still passes: the test apiservers' certificates cover 127.0.0.1).
func (p *CutProxy) ConfigVia(t testing.TB, cfg *rest.Config) *rest.Config {
	t.Helper()
	out := rest.CopyConfig(cfg)
	u, err := url.Parse(out.Host)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = p.Addr()
	out.Host = u.String()
	return out
}

// HostOf is the host:port of an apiserver URL, a proxy's target.
func HostOf(t testing.TB, server string) string {
	t.Helper()
	u, err := url.Parse(server)
	if err != nil || u.Host == "" {
		t.Fatalf("server %q: %v", server, err)
	}
	return u.Host
}

func (p *CutProxy) serve() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(in) {
			_ = in.Close()
			continue
		}
		go func() {
			out, err := net.DialTimeout("tcp", p.target, 5*time.Second)
			if err != nil || !p.track(out) {
				p.close(in)
				if out != nil {
					_ = out.Close()
				}
				return
			}
			go func() { _, _ = io.Copy(out, in); p.close(out); p.close(in) }()
			_, _ = io.Copy(in, out)
			p.close(in)
			p.close(out)
		}()
	}
}

// track registers c unless the proxy is cut.
func (p *CutProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *CutProxy) close(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}

// SetCut cuts (true) or heals (false) the proxy; cutting closes every open
// connection.
func (p *CutProxy) SetCut(cut bool) {
	p.mu.Lock()
	p.cut = cut
	var open []net.Conn
	if cut {
		for c := range p.conns {
			open = append(open, c)
		}
		p.conns = map[net.Conn]struct{}{}
	}
	p.mu.Unlock()
	for _, c := range open {
		_ = c.Close()
	}
}
