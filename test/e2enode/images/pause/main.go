// Command pause is the pod sandbox's process on the real node of make
// e2e-node (hack/e2e-node.sh): it holds the pod's namespaces, reaps the
// children it inherits, and exits on SIGINT or SIGTERM. containerd runs it
// as its sandbox_image, built by imagebuild as every image of the run.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
