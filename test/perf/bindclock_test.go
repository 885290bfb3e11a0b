//go:build perf

package perf

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"
)

// scheduler_perf's SchedulingDuration runs from the start of the measured
// phase to the end of the 1-second poll (waitUntilPodsScheduledInNamespace)
// that first finds every measured pod scheduled, so a phase of 2.1 s may
// have ended anywhere after 1.1 s: at 100 nodes a whole workload sits on
// that floor. The bind clock measures the same phase from the pods
// themselves: a pod informer over the measured namespace, started before the
// workload's first op, stamps each pod with the time its first event arrived
// (its creation) and the time the first event showing it bound
// (spec.nodeName set) arrived. The PodScheduled condition would do too, but
// its lastTransitionTime has whole seconds only.
//
// Reported, beside scheduler_perf's figures (which stay):
//
//	bound-pods      measured pods seen bound (the measured phase's count, when
//	                the clock saw all of them)
//	bound-span-s    first measured pod seen created to last seen bound
//	bound-pods/s    bound-pods over bound-span-s
//
// Both ends are seen by the same informer, so its delivery delay cancels out
// but for its jitter (milliseconds in-process).
type bindClock struct {
	mu      sync.Mutex
	created map[types.UID]time.Time
	bound   map[types.UID]time.Time
	cancel  context.CancelFunc
}

// bindClockWait is how long the clock waits, once the workload is done, for
// its informer to have seen every measured pod bound (scheduler_perf's own
// informer saw them first).
const bindClockWait = 30 * time.Second

func startBindClock(ctx context.Context, client kubernetes.Interface, namespace string) (*bindClock, error) {
	ctx, cancel := context.WithCancel(ctx)
	c := &bindClock{created: map[types.UID]time.Time{}, bound: map[types.UID]time.Time{}, cancel: cancel}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(namespace))
	pods := factory.Core().V1().Pods().Informer()
	if _, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.saw(obj, time.Now()) },
		UpdateFunc: func(_, obj any) { c.saw(obj, time.Now()) },
	}); err != nil {
		cancel()
		return nil, err
	}
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			cancel()
			return nil, fmt.Errorf("bind clock: the %v informer of namespace %q did not sync", typ, namespace)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.created) > 0 {
		cancel()
		return nil, fmt.Errorf("bind clock: namespace %q already holds %d pods before the workload starts", namespace, len(c.created))
	}
	return c, nil
}

func (c *bindClock) saw(obj any, now time.Time) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.created[pod.UID]; !ok {
		c.created[pod.UID] = now
	}
	if pod.Spec.NodeName != "" {
		if _, ok := c.bound[pod.UID]; !ok {
			c.bound[pod.UID] = now
		}
	}
}

// span is the time from the first pod seen created to the last seen bound,
// and the number of pods seen bound.
func (c *bindClock) span() (time.Duration, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var first, last time.Time
	for _, t := range c.created {
		if first.IsZero() || t.Before(first) {
			first = t
		}
	}
	for _, t := range c.bound {
		if t.After(last) {
			last = t
		}
	}
	if len(c.bound) == 0 {
		return 0, 0
	}
	return last.Sub(first), len(c.bound)
}

// report waits until the clock has seen want pods bound (or bindClockWait
// passed), stops it, and reports its figures. Fewer than want: bound-pods
// says how many, and no rate is reported.
func (c *bindClock) report(b *testing.B, want int) {
	defer c.cancel()
	ctx, cancel := context.WithTimeout(context.Background(), bindClockWait)
	defer cancel()
	_ = wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
		_, n := c.span()
		return n >= want, nil
	})
	d, n := c.span()
	b.ReportMetric(float64(n), "bound-pods")
	if n < want || d <= 0 {
		b.Logf("bind clock: %d of %d measured pods seen bound; no bound-pods/s", n, want)
		return
	}
	b.ReportMetric(d.Seconds(), "bound-span-s")
	b.ReportMetric(float64(n)/d.Seconds(), "bound-pods/s")
}

// measuredNamespaces maps each test case of a scheduler_perf workload file to
// the namespace of its measured pods: that of its createPods op with
// collectMetrics, or scheduler_perf's default for it, namespace-<op index>.
// A test case whose measured op comes after a createPodSets op (which
// scheduler_perf unrolls, shifting the indexes) or that has none is left out.
func measuredNamespaces(data []byte) (map[string]string, error) {
	var cases []struct {
		Name             string           `json:"name"`
		WorkloadTemplate []map[string]any `json:"workloadTemplate"`
	}
	if err := yaml.Unmarshal(data, &cases); err != nil {
		return nil, fmt.Errorf("reading the workload file for the measured namespaces: %w", err)
	}
	out := map[string]string{}
	for _, tc := range cases {
		for i, op := range tc.WorkloadTemplate {
			if op["opcode"] == "createPodSets" {
				break
			}
			if op["opcode"] != "createPods" {
				continue
			}
			if collect, _ := op["collectMetrics"].(bool); !collect {
				continue
			}
			ns, _ := op["namespace"].(string)
			if ns == "" {
				ns = fmt.Sprintf("namespace-%d", i)
			}
			out[tc.Name] = ns
			break
		}
	}
	return out, nil
}
