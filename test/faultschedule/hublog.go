package faultschedule

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"sync"

	"k8s.io/klog/v2"
)

// HubLog keeps the hub's log (klog) of the running schedule in memory
// instead of flooding the test output; a failing schedule writes it to a
// file.
type HubLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// CaptureKlog routes klog into a new HubLog.
func CaptureKlog() *HubLog {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("alsologtostderr", "false")
	_ = fs.Set("stderrthreshold", "FATAL")
	l := &HubLog{}
	klog.SetOutput(l)
	return l
}

// Write implements io.Writer; the log is bounded to its last ~16 MiB.
func (l *HubLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.buf.Len() > 16<<20 {
		rest := bytes.Clone(l.buf.Bytes()[8<<20:])
		l.buf.Reset()
		l.buf.Write(rest)
	}
	return l.buf.Write(p)
}

// Reset forgets what was logged.
func (l *HubLog) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Reset()
}

// Save writes the log to a file named after name in the system's temp
// directory and returns its path.
func (l *HubLog) Save(name string) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	path := filepath.Join(os.TempDir(), name)
	return path, os.WriteFile(path, l.buf.Bytes(), 0o644)
}
