package sandbox

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"github.com/go-logr/logr"
	"google.golang.org/grpc/grpclog"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
)

// logSetup is the logging state of one control plane.
type logSetup struct {
	// logger is for the sandbox's own messages (kubelet, start, stop). It
	// stays on when the components are quiet.
	logger klog.Logger
	// components is for kube-apiserver's and the controllers' contextual
	// logging: logger when verbose, a discarding logger when quiet.
	components klog.Logger
	// restore undoes what setupLogging did to klog's global state.
	restore func()
}

// setupLogging chooses the loggers and, unless verbose, silences klog's
// global output (kube-apiserver and the controllers write most of their lines
// there), etcd and gRPC until restore is called.
//
// The sandbox logger is the one in ctx if there is one. Otherwise, when
// quiet, it is a text logger on stderr with the verbosity of klog's -v flag,
// because klog's own output is switched off; when verbose it is klog's.
func setupLogging(ctx context.Context, verbose bool) logSetup {
	installGRPCLogger()
	_, ctxErr := logr.FromContext(ctx)
	hasCtxLogger := ctxErr == nil
	if verbose {
		grpcVerbose.Store(true)
		logger := klog.FromContext(ctx)
		return logSetup{logger: logger, components: logger, restore: func() {}}
	}

	grpcVerbose.Store(false)
	var logger klog.Logger
	if hasCtxLogger {
		logger = klog.FromContext(ctx)
	} else {
		cfg := textlogger.NewConfig(textlogger.Output(os.Stderr))
		_ = cfg.Verbosity().Set(fmt.Sprint(klogVerbosity()))
		logger = textlogger.NewLogger(cfg)
	}
	state := klog.CaptureState()
	klog.SetLogger(logr.Discard())
	return logSetup{
		logger:     logger,
		components: logr.Discard(),
		restore: func() {
			klog.Flush()
			state.Restore()
		},
	}
}

// klogVerbosity returns the level that klog's -v flag is set to.
func klogVerbosity() int {
	v := 0
	for v < 10 && klog.V(klog.Level(v+1)).Enabled() {
		v++
	}
	return v
}

var (
	grpcLoggerOnce sync.Once
	grpcVerbose    atomic.Bool
)

// installGRPCLogger replaces gRPC's global logger once per process, before
// etcd starts the first gRPC server. grpclog.SetLoggerV2 must not run
// concurrently with gRPC code, so later control planes switch it between
// quiet and verbose through grpcVerbose instead.
func installGRPCLogger() {
	grpcLoggerOnce.Do(func() { grpclog.SetLoggerV2(grpcLogger{}) })
}

// grpcLogger writes gRPC's log lines to klog when the current control plane is
// verbose, and drops them otherwise. Fatal always logs and exits.
type grpcLogger struct{}

var _ grpclog.LoggerV2 = grpcLogger{}

func (grpcLogger) Info(args ...any)   { whenVerbose(klog.InfoDepth, args...) }
func (grpcLogger) Infoln(args ...any) { whenVerbose(klog.InfoDepth, fmt.Sprintln(args...)) }
func (grpcLogger) Infof(format string, args ...any) {
	whenVerbose(klog.InfoDepth, fmt.Sprintf(format, args...))
}

func (grpcLogger) Warning(args ...any)   { whenVerbose(klog.WarningDepth, args...) }
func (grpcLogger) Warningln(args ...any) { whenVerbose(klog.WarningDepth, fmt.Sprintln(args...)) }
func (grpcLogger) Warningf(format string, args ...any) {
	whenVerbose(klog.WarningDepth, fmt.Sprintf(format, args...))
}

func (grpcLogger) Error(args ...any)   { whenVerbose(klog.ErrorDepth, args...) }
func (grpcLogger) Errorln(args ...any) { whenVerbose(klog.ErrorDepth, fmt.Sprintln(args...)) }
func (grpcLogger) Errorf(format string, args ...any) {
	whenVerbose(klog.ErrorDepth, fmt.Sprintf(format, args...))
}

// whenVerbose logs args with log, one of klog's *Depth functions, when the
// current control plane is verbose. The depth names gRPC's caller: above
// whenVerbose are the grpcLogger method and grpclog's package function.
func whenVerbose(log func(depth int, args ...any), args ...any) {
	if grpcVerbose.Load() {
		log(3, args...)
	}
}

func (grpcLogger) Fatal(args ...any) { klog.FatalDepth(2, args...) }

func (grpcLogger) Fatalln(args ...any) { klog.FatalDepth(2, fmt.Sprintln(args...)) }

func (grpcLogger) Fatalf(format string, args ...any) {
	klog.FatalDepth(2, fmt.Sprintf(format, args...))
}

// V reports whether gRPC's verbose logs at level l are wanted.
func (grpcLogger) V(l int) bool {
	return grpcVerbose.Load() && klog.V(klog.Level(l)).Enabled()
}
