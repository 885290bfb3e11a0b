package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
)

// etcdServer is an embedded single-member etcd that listens on loopback.
type etcdServer struct {
	etcd      *embed.Etcd
	clientURL string
	closeOnce sync.Once
}

// startEtcdAttempts bounds the retries when a free port that was picked is
// taken by someone else before etcd binds it.
const startEtcdAttempts = 3

// startEtcd starts etcd with its data in dir/etcd and waits until it serves.
func startEtcd(ctx context.Context, dir string, verbose bool) (*etcdServer, error) {
	logger := klog.FromContext(ctx)
	var lastErr error
	for attempt := 1; attempt <= startEtcdAttempts; attempt++ {
		s, err := startEtcdOnce(ctx, filepath.Join(dir, fmt.Sprintf("etcd-%d", attempt)), verbose)
		if err == nil {
			return s, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		lastErr = err
		logger.V(2).Info("Embedded etcd did not start, retrying on other ports", "attempt", attempt, "err", err)
	}
	return nil, lastErr
}

func startEtcdOnce(ctx context.Context, dir string, verbose bool) (*etcdServer, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create etcd data directory: %w", err)
	}
	ports, err := freeLoopbackPorts(2)
	if err != nil {
		return nil, err
	}
	clientURL := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))}
	peerURL := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1]))}

	cfg := embed.NewConfig()
	cfg.Name = "sandbox"
	cfg.Dir = dir
	cfg.UnsafeNoFsync = true
	cfg.ListenClientUrls = []url.URL{clientURL}
	cfg.AdvertiseClientUrls = []url.URL{clientURL}
	cfg.ListenPeerUrls = []url.URL{peerURL}
	cfg.AdvertisePeerUrls = []url.URL{peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.ListenMetricsUrls = nil
	cfg.EnableGRPCGateway = false
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(etcdLogger(verbose))

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("start embedded etcd on %s: %w", clientURL.Host, err)
	}
	s := &etcdServer{etcd: e, clientURL: clientURL.String()}
	select {
	case <-e.Server.ReadyNotify():
		return s, nil
	case err := <-e.Err():
		s.close()
		return nil, fmt.Errorf("embedded etcd failed while starting: %w", err)
	case <-time.After(time.Minute):
		s.close()
		return nil, errors.New("embedded etcd was not ready within a minute")
	case <-ctx.Done():
		s.close()
		return nil, fmt.Errorf("embedded etcd did not become ready: %w", context.Cause(ctx))
	}
}

// close stops etcd and waits for it. It may be called more than once;
// embed.Etcd.Close panics on a second call.
func (s *etcdServer) close() {
	s.closeOnce.Do(func() {
		s.etcd.Close()
		<-s.etcd.Server.StopNotify()
	})
}

// etcdLogger is silent unless verbose, and then logs at info level to stderr.
func etcdLogger(verbose bool) *zap.Logger {
	if !verbose {
		return zap.NewNop()
	}
	cfg := zap.NewProductionConfig()
	cfg.Level = zap.NewAtomicLevelAt(zapcore.InfoLevel)
	cfg.Encoding = "console"
	cfg.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	cfg.Sampling = nil
	lg, err := cfg.Build()
	if err != nil {
		return zap.NewNop()
	}
	return lg.Named("etcd")
}

// freeLoopbackPorts returns n TCP ports on 127.0.0.1 that were free a moment
// ago. Another process may take one before it is used; startEtcd retries then.
func freeLoopbackPorts(n int) ([]int, error) {
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free loopback port: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
