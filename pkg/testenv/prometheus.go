package testenv

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// StartPrometheus runs the real Prometheus (bin/prometheus, as
// hack/local-up.sh's start_prometheus does) scraping target every second,
// and returns its address once it is ready.
func StartPrometheus(t testing.TB, target string) string {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(AssetsDir(root), "prometheus")
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("%s is missing (make tools builds it): %v", bin, err)
	}
	dir := t.TempDir()
	config := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: app
    static_configs:
      - targets: ['%s']
`, target)
	configFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(configFile, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	listen := FreeAddr(t)
	var logs syncBuffer
	cmd := exec.Command(bin,
		"--config.file", configFile,
		"--storage.tsdb.path", filepath.Join(dir, "data"),
		"--web.listen-address", listen,
	)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	// Registered after t.TempDir, so it runs before the directory goes.
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("Prometheus' log:\n%s", logs.String())
		}
	})
	address := "http://" + listen
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(address + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return address
			}
		}
		select {
		case <-exited:
			t.Fatalf("Prometheus exited:\n%s", logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("Prometheus not ready at %s after 60s:\n%s", address, logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
