// Command e2enode brings the real node of make e2e-node up and down
// (internal/realnode); hack/e2e-node.sh runs it.
//
//	e2enode check              exit 1, naming what is missing, if this host cannot run a real node
//	e2enode up ARCHIVE...      bring the node up, importing the OCI archives into containerd
//	e2enode spare-node         keep the spare Node Ready (up runs it in the background)
//	e2enode down               stop and remove everything up started or changed
//	e2enode snapshot FILE      write the host's state that a run touches
//	e2enode compare FILE       exit 1, naming each difference, unless the host's state equals FILE's
//
// The layout is realnode.DefaultLayout of the repository it runs in.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/budgetguard/budgetguard/internal/realnode"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "e2enode:", err)
		os.Exit(1)
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "e2enode: "+format+"\n", args...)
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: e2enode check|up ARCHIVE...|down|snapshot FILE|compare FILE")
	}
	repo, err := os.Getwd()
	if err != nil {
		return err
	}
	l := realnode.DefaultLayout(repo)
	switch cmd, rest := args[0], args[1:]; cmd {
	case "check":
		if missing := realnode.Preflight(l); len(missing) > 0 {
			for _, m := range missing {
				fmt.Fprintf(os.Stderr, "e2enode: this host lacks %s (%s)\n", m.What, m.Fix)
			}
			return fmt.Errorf("this host cannot run a real node")
		}
		return nil
	case "up":
		ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer cancel()
		start := time.Now()
		self, err := os.Executable()
		if err != nil {
			return err
		}
		if err := realnode.Up(ctx, l, realnode.Options{Images: rest, SpareNode: []string{self, "spare-node"}, Logf: logf}); err != nil {
			return err
		}
		logf("up in %s; KUBECONFIG=%s", time.Since(start).Round(100*time.Millisecond), l.AdminKubeconfig())
		return nil
	case "spare-node":
		ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer cancel()
		return realnode.RunSpareNode(ctx, l)
	case "down":
		start := time.Now()
		err := realnode.Down(l, logf)
		logf("down in %s", time.Since(start).Round(100*time.Millisecond))
		return err
	case "snapshot", "compare":
		if len(rest) != 1 {
			return fmt.Errorf("usage: e2enode %s FILE", cmd)
		}
		if cmd == "snapshot" {
			snap, err := realnode.Snapshot()
			if err != nil {
				return err
			}
			return realnode.WriteSnapshot(rest[0], snap)
		}
		before, err := realnode.ReadSnapshot(rest[0])
		if err != nil {
			return err
		}
		// The kernel destroys a network namespace, and its veth, after
		// its last process: give it a few seconds.
		var diffs []string
		for range 20 {
			after, err := realnode.Snapshot()
			if err != nil {
				return err
			}
			if diffs = realnode.Compare(before, after); len(diffs) == 0 {
				return nil
			}
			time.Sleep(500 * time.Millisecond)
		}
		for _, d := range diffs {
			fmt.Fprintln(os.Stderr, "e2enode: the host differs from before the run:", d)
		}
		return fmt.Errorf("the run did not leave the host as it found it (%d differences)", len(diffs))
	default:
		return fmt.Errorf("unknown command %q; want check, up, down, snapshot or compare", cmd)
	}
}
