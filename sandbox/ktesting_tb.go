package sandbox

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"k8s.io/klog/v2"
	"k8s.io/kubernetes/test/utils/ktesting"
)

// This file adapts ktesting.TB, the test handle that kube-apiserver's
// StartTestServer takes, to a control plane started outside of "go test".

// harness implements ktesting.TB outside of "go test", for
// kube-apiserver's StartTestServer and the feature-gate helpers it calls.
//
// Log output goes to the sandbox logger at verbosity 4. Errors are collected
// and reported by Start. Fatal, Fatalf, FailNow, and the Skip family panic
// with harnessAbort; the harness only calls code that may do so through
// run, which recovers. Cleanups run in last-in-first-out order in
// runCleanups, which Stop calls after kube-apiserver has shut down; they
// restore the feature gates that StartTestServer changed.
type harness struct {
	name   string
	logger klog.Logger

	mu       sync.Mutex
	failed   bool
	skipped  bool
	errs     []string
	cleanups []func()
}

var _ ktesting.TB = &harness{}

// harnessAbort is the panic value with which the harness ends the code it
// runs, where a test would call runtime.Goexit.
type harnessAbort struct{}

func newHarness(name string, logger klog.Logger) *harness {
	return &harness{name: name, logger: logger}
}

// run calls f and turns an abort through Fatal or FailNow into an error.
// Errors reported with Error or Errorf are returned too.
func (h *harness) run(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(harnessAbort); !ok {
				panic(r)
			}
			err = h.err()
			if err == nil {
				err = errors.New("aborted without a message")
			}
		}
	}()
	if err := f(); err != nil {
		return err
	}
	return h.err()
}

// err returns the errors reported so far, or nil.
func (h *harness) err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.errs) == 0 {
		if h.failed {
			return errors.New("failed without a message")
		}
		return nil
	}
	return errors.New(strings.Join(h.errs, "; "))
}

// runCleanups runs the registered cleanups in reverse order, each at most
// once, and returns what they reported.
func (h *harness) runCleanups() error {
	h.mu.Lock()
	h.errs = nil
	h.failed = false
	h.mu.Unlock()
	for {
		h.mu.Lock()
		n := len(h.cleanups)
		if n == 0 {
			h.mu.Unlock()
			break
		}
		f := h.cleanups[n-1]
		h.cleanups = h.cleanups[:n-1]
		h.mu.Unlock()
		_ = h.run(func() error { f(); return nil })
	}
	return h.err()
}

func (h *harness) record(msg string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failed = true
	h.errs = append(h.errs, strings.TrimSpace(msg))
}

func (h *harness) Attr(key, value string) {
	h.logger.V(4).Info("Harness attribute", "key", key, "value", value)
}

func (h *harness) Chdir(dir string) {
	h.Fatalf("the sandbox harness does not change the working directory (asked for %q)", dir)
}

func (h *harness) Cleanup(f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cleanups = append(h.cleanups, f)
}

func (h *harness) Error(args ...any) { h.record(fmt.Sprintln(args...)) }

func (h *harness) Errorf(format string, args ...any) { h.record(fmt.Sprintf(format, args...)) }

func (h *harness) Fail() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failed = true
}

func (h *harness) FailNow() {
	h.Fail()
	panic(harnessAbort{})
}

func (h *harness) Failed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.failed
}

func (h *harness) Fatal(args ...any) {
	h.Error(args...)
	h.FailNow()
}

func (h *harness) Fatalf(format string, args ...any) {
	h.Errorf(format, args...)
	h.FailNow()
}

func (h *harness) Helper() {}

func (h *harness) Log(args ...any) {
	h.logger.V(4).Info(strings.TrimSpace(fmt.Sprintln(args...)))
}

func (h *harness) Logf(format string, args ...any) {
	h.logger.V(4).Info(strings.TrimSpace(fmt.Sprintf(format, args...)))
}

func (h *harness) Name() string { return h.name }

// Setenv sets an environment variable until the cleanups run.
func (h *harness) Setenv(key, value string) {
	prev, had := os.LookupEnv(key)
	if err := os.Setenv(key, value); err != nil {
		h.Fatalf("set environment variable %s: %v", key, err)
	}
	h.Cleanup(func() {
		if had {
			_ = os.Setenv(key, prev)
		} else {
			_ = os.Unsetenv(key)
		}
	})
}

func (h *harness) Skip(args ...any) {
	h.Log(args...)
	h.SkipNow()
}

func (h *harness) Skipf(format string, args ...any) {
	h.Logf(format, args...)
	h.SkipNow()
}

// SkipNow aborts like FailNow: nothing that the sandbox runs may be skipped.
func (h *harness) SkipNow() {
	h.mu.Lock()
	h.skipped = true
	h.mu.Unlock()
	h.record("skipped")
	panic(harnessAbort{})
}

func (h *harness) Skipped() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.skipped
}

// TempDir returns a new directory that is removed when the cleanups run.
func (h *harness) TempDir() string {
	dir, err := os.MkdirTemp("", "sandbox-harness-")
	if err != nil {
		h.Fatalf("create temporary directory: %v", err)
	}
	h.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}
