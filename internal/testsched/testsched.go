// Package testsched runs a real kube-scheduler in the test's process, with
// BudgetAwarePreemption registered as cmd/scheduler registers it, for the
// integration tests.
package testsched

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/kubernetes/pkg/scheduler"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	schedscheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/profile"

	"github.com/budgetguard/budgetguard/plugins/budgetpreemption"
)

// Run runs a kube-scheduler with client and kubeConfig and the profiles of
// docs (KubeSchedulerConfigurations, as testobj.SchedulerConfig renders
// them) until the test ends, or until the stop function it returns is
// called. As cmd/scheduler does, BudgetAwarePreemption is the PodGroup
// preemption plugin of the profiles that enable it (see
// budgetpreemption.EnablePodGroupPreemption).
func Run(t testing.TB, client kubernetes.Interface, kubeConfig *rest.Config, docs ...string) (stop func(), err error) {
	t.Helper()
	var profiles []schedconfig.KubeSchedulerProfile
	for _, doc := range docs {
		obj, _, err := schedscheme.Codecs.UniversalDecoder().Decode([]byte(doc), nil, nil)
		if err != nil {
			return nil, fmt.Errorf("decode scheduler configuration: %w", err)
		}
		profiles = append(profiles, obj.(*schedconfig.KubeSchedulerConfiguration).Profiles...)
	}

	ctx, cancel := context.WithCancel(context.Background())
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: client.EventsV1()})
	broadcaster.StartRecordingToSink(ctx.Done())
	factory := scheduler.NewInformerFactory(client, 0, nil)
	sched, err := scheduler.New(ctx, client, factory, nil, profile.NewRecorderFactory(broadcaster),
		scheduler.WithKubeConfig(kubeConfig),
		scheduler.WithProfiles(profiles...),
		scheduler.WithPodInitialBackoffSeconds(1),
		scheduler.WithPodMaxBackoffSeconds(2),
		scheduler.WithFrameworkOutOfTreeRegistry(frameworkruntime.Registry{budgetpreemption.Name: budgetpreemption.New}),
	)
	if err != nil {
		cancel()
		broadcaster.Shutdown()
		return nil, err
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	if err := sched.WaitForHandlersSync(ctx); err != nil {
		cancel()
		return nil, fmt.Errorf("scheduler handlers: %w", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sched.Run(ctx)
	}()
	stop = sync.OnceFunc(func() {
		cancel()
		<-done
		factory.Shutdown()
		broadcaster.Shutdown()
	})
	t.Cleanup(stop)
	return stop, nil
}
