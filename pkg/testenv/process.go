package testenv

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// BuildBinary compiles a main package of the project (e.g. "./hub") into the
// test's temp dir and returns the binary's path.
func BuildBinary(t testing.TB, pkg string) string {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	return out
}

// FreeAddr returns a loopback host:port nobody listens on right now.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Process is a binary started by StartProcess.
type Process struct {
	Cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited
	err  error         // exit error, valid after done is closed
	out  *syncBuffer
}

// StartProcess runs a binary with its output going to the test log, and kills
// it at the end of the test if it is still running.
func StartProcess(t testing.TB, bin string, args ...string) *Process {
	t.Helper()
	cmd := exec.Command(bin, args...)
	out := &syncBuffer{}
	w := io.MultiWriter(out, testWriter{t})
	cmd.Stdout = w
	cmd.Stderr = w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &Process{Cmd: cmd, done: make(chan struct{}), out: out}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // no-op error if it already exited
		<-p.done
	})
	return p
}

// Terminate sends SIGTERM and waits up to timeout for the process to exit,
// returning its exit error (nil for a clean exit).
func (p *Process) Terminate(timeout time.Duration) error {
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	return p.Wait(timeout)
}

// Output is everything the process wrote to stdout and stderr so far.
func (p *Process) Output() string { return p.out.String() }

// Wait waits up to timeout for the process to exit and returns its exit error
// (nil for a clean exit).
func (p *Process) Wait(timeout time.Duration) error {
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		return fmt.Errorf("process %d still running %s after SIGTERM", p.Cmd.Process.Pid, timeout)
	}
}

// HTTPGet fetches http://hostport/path and returns the status code and body.
func HTTPGet(ctx context.Context, hostport, path string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+hostport+path, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	if os.Getenv("TESTENV_QUIET") == "" {
		w.t.Logf("%s", p)
	}
	return len(p), nil
}
