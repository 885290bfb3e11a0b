package sandbox

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"

	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	kubeapiservertesting "k8s.io/kubernetes/cmd/kube-apiserver/app/testing"
	"k8s.io/kubernetes/test/utils/ktesting"
)

// apiServerFlags are always passed to kube-apiserver. No endpoint reconciler
// (it would keep failing on a loopback address), and no ServiceAccount
// admission (no controller creates service accounts here).
var apiServerFlags = []string{
	"--endpoint-reconciler-type=none",
	"--disable-admission-plugins=ServiceAccount",
}

// apiServer is a kube-apiserver running in this process.
type apiServer struct {
	config   *rest.Config
	tearDown func()
	// servingCA verifies kube-apiserver's serving certificate for
	// 127.0.0.1 (config verifies the loopback certificate only, which it
	// asks for by server name).
	servingCA []byte
}

// startAPIServer starts kube-apiserver against the etcd at etcdURL and waits
// until /healthz is ok and the default namespace exists. ctx carries the
// logger that kube-apiserver uses for contextual logging; it is not cancelled
// by the caller while the server runs, tearDown stops it.
func startAPIServer(ctx context.Context, h *harness, etcdURL string, extraFlags []string) (*apiServer, error) {
	storage := storagebackend.NewDefaultConfig(path.Join("/registry", "sandbox"), nil)
	storage.Transport.ServerList = []string{etcdURL}

	flags := append(append([]string{}, apiServerFlags...), extraFlags...)
	var server kubeapiservertesting.TestServer
	err := h.run(func() error {
		// StartTestServer takes over a TContext rather than creating its own,
		// which would log per test and watch for interrupt signals.
		tCtx := ktesting.InitCtx(ctx, h)
		var err error
		server, err = kubeapiservertesting.StartTestServer(tCtx, nil, flags, storage)
		return err
	})
	if err != nil {
		if server.TearDownFn != nil {
			server.TearDownFn()
		}
		return nil, fmt.Errorf("start kube-apiserver: %w", err)
	}
	klog.FromContext(ctx).V(4).Info("kube-apiserver is serving", "host", server.ClientConfig.Host)
	// StartTestServer writes the serving certificate, with the CA that
	// signed it, to <TmpDir>/apiserver.crt.
	servingCA, err := os.ReadFile(filepath.Join(server.TmpDir, "apiserver.crt"))
	if err != nil {
		server.TearDownFn()
		return nil, fmt.Errorf("read kube-apiserver's serving certificate: %w", err)
	}
	return &apiServer{config: server.ClientConfig, tearDown: server.TearDownFn, servingCA: servingCA}, nil
}
