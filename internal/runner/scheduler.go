package runner

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/profile"

	"github.com/budgetguard/budgetguard/internal/report"
	"github.com/budgetguard/budgetguard/internal/schedulerconfig"
	"github.com/budgetguard/budgetguard/plugins/budgetpreemption"
)

// schedulerUserAgent is the user agent of the scheduler's requests; the
// auditor attributes them to audit.ComponentScheduler.
const schedulerUserAgent = "sandbox-scheduler"

// runningScheduler is kube-scheduler running in this process.
type runningScheduler struct {
	cancel      context.CancelFunc
	done        chan struct{}
	factory     interface{ Shutdown() }
	broadcaster events.EventBroadcaster
	stopOnce    sync.Once
}

// startScheduler runs kube-scheduler with cfg against the API server that
// config reaches, as kube-scheduler's own Setup builds it. In
// ModeBudgetguard, BudgetAwarePreemption is registered; in ModeUpstream it is
// not, so a profile that still named it would fail here.
// Every event the scheduler emits also goes to seen.
func startScheduler(ctx context.Context, config *rest.Config, cfg *schedulerConfig, mode report.Mode, seen *eventLog) (*runningScheduler, error) {
	kubeConfig := rest.AddUserAgent(rest.CopyConfig(config), schedulerUserAgent)
	client, err := kubernetes.NewForConfig(kubeConfig)
	if err != nil {
		return nil, fmt.Errorf("scheduler client: %w", err)
	}
	registry := frameworkruntime.Registry{}
	if mode == report.ModeBudgetguard {
		registry[budgetpreemption.Name] = budgetpreemption.New
	}
	// As cmd/scheduler does: say per profile where BudgetAwarePreemption
	// runs (in an upstream run, nowhere).
	schedulerconfig.Report(klog.FromContext(ctx), cfg.config)

	ctx, cancel := context.WithCancel(ctx)
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: client.EventsV1()})
	broadcaster.StartRecordingToSink(ctx.Done())
	if _, err := broadcaster.StartEventWatcher(seen.watch); err != nil {
		cancel()
		broadcaster.Shutdown()
		return nil, fmt.Errorf("watch the scheduler's events: %w", err)
	}
	factory := scheduler.NewInformerFactory(client, 0, nil)
	c := cfg.config
	sched, err := scheduler.New(ctx, client, factory, nil, profile.NewRecorderFactory(broadcaster),
		scheduler.WithComponentConfigVersion(c.APIVersion),
		scheduler.WithKubeConfig(kubeConfig),
		scheduler.WithProfiles(c.Profiles...),
		scheduler.WithPercentageOfNodesToScore(c.PercentageOfNodesToScore),
		scheduler.WithFrameworkOutOfTreeRegistry(registry),
		scheduler.WithPodMaxBackoffSeconds(c.PodMaxBackoffSeconds),
		scheduler.WithPodInitialBackoffSeconds(c.PodInitialBackoffSeconds),
		scheduler.WithExtenders(c.Extenders...),
		scheduler.WithParallelism(c.Parallelism),
	)
	if err != nil {
		cancel()
		broadcaster.Shutdown()
		return nil, fmt.Errorf("create scheduler: %w", err)
	}
	s := &runningScheduler{cancel: cancel, done: make(chan struct{}), factory: factory, broadcaster: broadcaster}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	if err := sched.WaitForHandlersSync(ctx); err != nil {
		close(s.done)
		s.stop()
		return nil, fmt.Errorf("scheduler event handlers: %w", err)
	}
	go func() {
		defer close(s.done)
		sched.Run(ctx)
	}()
	return s, nil
}

// stop stops the scheduler and waits until it has returned. It may be
// called more than once.
func (s *runningScheduler) stop() {
	if s == nil {
		return
	}
	s.stopOnce.Do(func() {
		s.cancel()
		<-s.done
		s.factory.Shutdown()
		s.broadcaster.Shutdown()
	})
}
