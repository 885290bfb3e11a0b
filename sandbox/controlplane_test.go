package sandbox

import (
	"context"
	"errors"
	"net"
	"net/url"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"
)

// TestStartStopRestart starts two control planes one after the other, one
// with and one without the PodUnavailableBudget CRD, and checks that Stop
// can be called twice and closes the listeners.
func TestStartStopRestart(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()

	first, err := Start(ctx, DefaultOptions())
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Logf("first control plane started in %s", first.StartDuration)
	if _, err := Start(ctx, DefaultOptions()); !errors.Is(err, ErrAlreadyRunning) {
		t.Errorf("second Start while the first runs: error = %v, want ErrAlreadyRunning", err)
	}
	if !resourceServed(first.Client.Discovery(), PUBGroupVersion, PUBResource) {
		t.Errorf("%s %s is not served with InstallPUBCRD", PUBGroupVersion, PUBResource)
	}
	if _, err := first.Client.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Errorf("get namespace default: %v", err)
	}
	addrs := listenAddrs(t, first)
	if first.webhook == nil {
		t.Error("the PUB webhook does not run with DefaultOptions")
	}

	if err := first.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
	if err := first.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	for _, addr := range addrs {
		if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			_ = conn.Close()
			t.Errorf("%s still accepts connections after Stop", addr)
		}
	}

	opts := DefaultOptions()
	opts.InstallPUBCRD = false
	second := startControlPlane(ctx, t, opts)
	t.Logf("second control plane started in %s", second.StartDuration)
	if resourceServed(second.Client.Discovery(), PUBGroupVersion, PUBResource) {
		t.Errorf("%s %s is served without InstallPUBCRD", PUBGroupVersion, PUBResource)
	}
	if _, err := second.KruiseClient.PolicyV1alpha1().PodUnavailableBudgets("default").List(ctx, metav1.ListOptions{}); err == nil {
		t.Error("listing PodUnavailableBudgets without the CRD succeeded, want an error")
	}
}

// startControlPlane starts a control plane with opts and stops it when the
// test ends, after the cleanups registered later, which may still use it.
func startControlPlane(ctx context.Context, t *testing.T, opts Options) *ControlPlane {
	t.Helper()
	cp, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return cp
}

// listenAddrs returns the host:port of kube-apiserver and etcd, and of the
// PUB webhook when it runs.
func listenAddrs(t *testing.T, cp *ControlPlane) []string {
	t.Helper()
	var addrs []string
	if cp.webhook != nil {
		addrs = append(addrs, cp.webhook.listener.Addr().String())
	}
	for _, raw := range []string{cp.Config.Host, cp.EtcdURL} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatalf("parse %q: %v", raw, err)
		}
		addrs = append(addrs, u.Host)
	}
	return addrs
}

func TestStopNil(t *testing.T) {
	var cp *ControlPlane
	if err := cp.Stop(); err != nil {
		t.Errorf("Stop on nil: %v", err)
	}
}
