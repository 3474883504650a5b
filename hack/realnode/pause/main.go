// Command pause is the real-node e2e clusters' pod sandbox ("pause") and
// workload image: no registry is reachable there, so the provider builds its
// own. It sleeps until SIGTERM or SIGINT and, as PID 1 of a sandbox, reaps
// children that are handed to it.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			return
		}
		for {
			var ws syscall.WaitStatus
			if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
	}
}
