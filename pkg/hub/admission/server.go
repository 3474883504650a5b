package admission

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// Certificates is the serving certificate in use, swapped atomically when
// the Secret (or the certificate directory) changes: connections made after
// a swap get the new one, without a restart.
type Certificates struct {
	current atomic.Pointer[tls.Certificate]
	metrics *Metrics

	mu              sync.Mutex
	certPEM, keyPEM []byte
}

// NewCertificates returns an empty set; metrics may be nil.
func NewCertificates(metrics *Metrics) *Certificates {
	return &Certificates{metrics: metrics}
}

// Set makes the PEM pair the one served. An unchanged pair is a no-op.
func (c *Certificates) Set(certPEM, keyPEM []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.current.Load() != nil && bytes.Equal(certPEM, c.certPEM) && bytes.Equal(keyPEM, c.keyPEM) {
		return nil
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return err
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return err
	}
	pair.Leaf = leaf
	c.current.Store(&pair)
	c.certPEM, c.keyPEM = bytes.Clone(certPEM), bytes.Clone(keyPEM)
	c.metrics.expiry(float64(leaf.NotAfter.Unix()))
	klog.InfoS("Webhook serving certificate loaded", "notAfter", leaf.NotAfter.UTC().Format(time.RFC3339), "serial", leaf.SerialNumber.Text(16))
	return nil
}

// GetCertificate is tls.Config's GetCertificate.
func (c *Certificates) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if cert := c.current.Load(); cert != nil {
		return cert, nil
	}
	return nil, errors.New("the webhook has no serving certificate yet")
}

// Ready fails until a certificate is loaded (the hub's /readyz check
// "webhook").
func (c *Certificates) Ready() error {
	if c.current.Load() == nil {
		return errors.New("no webhook serving certificate loaded yet")
	}
	return nil
}

// WatchDir loads tls.crt and tls.key from dir (--webhook-cert-dir: a
// mounted Secret of cert-manager or the like) and reloads them when they
// change, checking every period, until ctx ends. The first load must
// succeed.
func (c *Certificates) WatchDir(ctx context.Context, dir string, period time.Duration) error {
	load := func() error {
		certPEM, err := os.ReadFile(filepath.Join(dir, corev1.TLSCertKey))
		if err != nil {
			return err
		}
		keyPEM, err := os.ReadFile(filepath.Join(dir, corev1.TLSPrivateKeyKey))
		if err != nil {
			return err
		}
		return c.Set(certPEM, keyPEM)
	}
	if err := load(); err != nil {
		return fmt.Errorf("--webhook-cert-dir: %w", err)
	}
	go func() {
		ticker := time.NewTicker(period)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
				// A Secret volume is updated by swapping a symlink: a
				// read between the two files may pair a new certificate
				// with the old key, which Set refuses; the next tick
				// reads both again.
				if err := load(); err != nil {
					klog.ErrorS(err, "Reloading the webhook serving certificate", "dir", dir)
				}
			}
		}
	}()
	return nil
}

// Server serves the webhook over TLS.
type Server struct {
	address string
	handler http.Handler
	certs   *Certificates
}

// NewServer returns a server on address (host:port) answering ValidatePath
// with handler, with the certificates of certs.
func NewServer(address string, handler http.Handler, certs *Certificates) *Server {
	mux := http.NewServeMux()
	mux.Handle(ValidatePath, handler)
	return &Server{address: address, handler: mux, certs: certs}
}

// Timeouts of the webhook's connections. The apiserver gives a call at most
// the webhook's timeoutSeconds (manifests/hub/webhook.yaml: 5s); these only
// bound what a slow or idle client can hold.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 10 * time.Second
	writeTimeout      = 10 * time.Second
	idleTimeout       = 90 * time.Second
)

// Run listens and serves until ctx ends; a listen error is returned at once.
func (s *Server) Run(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.address)
	if err != nil {
		return fmt.Errorf("webhook: listening on %s: %w", s.address, err)
	}
	return s.Serve(ctx, ln)
}

// Serve serves on ln until ctx ends.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    1 << 16,
		TLSConfig: &tls.Config{
			MinVersion:     tls.VersionTLS12,
			GetCertificate: s.certs.GetCertificate,
		},
	}
	klog.InfoS("Serving the admission webhook", "address", ln.Addr().String(), "path", ValidatePath)
	errs := make(chan error, 1)
	go func() {
		if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs <- err
		}
	}()
	select {
	case <-ctx.Done():
	case err := <-errs:
		return fmt.Errorf("webhook: %w", err)
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutdownCtx)
	return nil
}
