// Command webapp is the application of make e2e-node's real node
// (hack/e2e-node.sh): an HTTP server whose readiness a kubelet probes and
// whose shutdown takes time, as a real application's does.
//
//	GET /ready    200 once ready, 503 before, while flapping and while shutting down
//	GET /healthz  200 while the process runs
//
// Environment:
//
//	READY_AFTER      how long after start it turns ready (default 2s)
//	FLAP_EVERY       if set, every such interval it turns not ready, with
//	                 probability FLAP_PROBABILITY (default 0.5), for FLAP_FOR
//	                 (default 3s): a readiness probe that flaps
//	SHUTDOWN_DELAY   how long it keeps serving after SIGTERM, not ready,
//	                 before it exits 0 (default 0); a grace period shorter
//	                 than this ends in SIGKILL
package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
)

func duration(name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		fmt.Fprintf(os.Stderr, "webapp: %s=%q: %v\n", name, v, err)
		os.Exit(2)
	}
	return d
}

func main() {
	readyAfter := duration("READY_AFTER", 2*time.Second)
	flapEvery := duration("FLAP_EVERY", 0)
	flapFor := duration("FLAP_FOR", 3*time.Second)
	shutdownDelay := duration("SHUTDOWN_DELAY", 0)
	prob := 0.5
	if v := os.Getenv("FLAP_PROBABILITY"); v != "" {
		p, err := strconv.ParseFloat(v, 64)
		if err != nil || p < 0 || p > 1 {
			fmt.Fprintf(os.Stderr, "webapp: FLAP_PROBABILITY=%q: want a number in [0, 1]\n", v)
			os.Exit(2)
		}
		prob = p
	}

	var ready, flapping, stopping atomic.Bool
	mux := http.NewServeMux()
	mux.HandleFunc("/ready", func(w http.ResponseWriter, _ *http.Request) {
		if ready.Load() && !flapping.Load() && !stopping.Load() {
			fmt.Fprintln(w, "ready")
			return
		}
		http.Error(w, "not ready", http.StatusServiceUnavailable)
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	srv := &http.Server{Addr: ":8080", Handler: mux, ReadHeaderTimeout: 5 * time.Second}

	time.AfterFunc(readyAfter, func() {
		ready.Store(true)
		fmt.Println("webapp: ready")
	})
	if flapEvery > 0 {
		go func() {
			for range time.Tick(flapEvery) {
				if stopping.Load() || rand.Float64() >= prob {
					continue
				}
				fmt.Printf("webapp: not ready for %s\n", flapFor)
				flapping.Store(true)
				time.Sleep(flapFor)
				flapping.Store(false)
				fmt.Println("webapp: ready again")
			}
		}()
	}

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		sig := <-sigs
		stopping.Store(true)
		fmt.Printf("webapp: %s, exiting in %s\n", sig, shutdownDelay)
		time.Sleep(shutdownDelay)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}()
	fmt.Println("webapp: listening on :8080")
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		fmt.Fprintln(os.Stderr, "webapp:", err)
		os.Exit(1)
	}
	fmt.Println("webapp: exited")
}
