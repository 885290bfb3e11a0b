package main

import (
	"context"
	"io"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
)

// quietLogging makes klog's global logger discard everything and returns a
// context whose logger writes errors, and nothing else, to w. The sandbox,
// the scheduler and the runner log through the context's logger, so a quiet
// run shows its progress lines and real errors only.
func quietLogging(ctx context.Context, w io.Writer) context.Context {
	klog.SetLogger(logr.Discard())
	text := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(w)))
	return klog.NewContext(ctx, logr.New(errorsOnly{text.GetSink()}))
}

// errorsOnly is a LogSink that passes Error calls on and drops Info calls.
type errorsOnly struct{ logr.LogSink }

func (errorsOnly) Enabled(int) bool { return false }

func (e errorsOnly) WithValues(kv ...any) logr.LogSink {
	return errorsOnly{e.LogSink.WithValues(kv...)}
}

func (e errorsOnly) WithName(name string) logr.LogSink {
	return errorsOnly{e.LogSink.WithName(name)}
}
