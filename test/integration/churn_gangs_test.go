package integration

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/budgetguard/budgetguard/internal/testenv"
	"github.com/budgetguard/budgetguard/internal/testobj"
)

// Pod groups in the churn. With -gangs the package's control plane runs
// with the GenericWorkload gate on and scheduling.k8s.io/v1beta1 served
// (gates are process-wide: the whole package runs so, which is why make
// test runs the promise tests a second time with -gangs rather than
// turning it on for everything), and the churn adds, beside its pods:
//   - gang preemptors: every other preemption wave is a PodGroup of
//     waveSize pods that schedule together (minCount waveSize), which
//     preempts through BudgetAwarePreemption at podGroupPostFilter;
//   - a victim group: the last app's pods are members of a PodGroup whose
//     disruptionMode is All, so preemption takes them whole or not at all,
//     every pod of it against the app's budget together.
var gangs = flag.Bool("gangs", false, "run the control plane with the GenericWorkload gate on and scheduling.k8s.io/v1beta1 served; the churn of the promise tests adds pod groups (gang preemptors, and an app disrupted whole)")

// gangAPIServerFlags are kube-apiserver's flags for -gangs; its test
// server copies the gates into the process, where the scheduler reads them.
func gangAPIServerFlags() []string {
	return []string{testenv.PodGroupAPI, testenv.FeatureGates(testenv.GangGate)}
}

// gangCounts are the churn's pod group counts, for its summary.
type gangCounts struct {
	waves, bound atomic.Int64
}

// groupApp makes the pods of tmpl, app name's, members of a PodGroup of the
// same name whose disruptionMode is All (a basic scheduling policy: they
// schedule one by one, and are disrupted together).
func (c *churn) groupApp(t *testing.T, name string, tmpl *corev1.PodTemplateSpec) {
	t.Helper()
	pg := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.ns},
		Spec: schedulingv1beta1.PodGroupSpec{
			SchedulingPolicy:  schedulingv1beta1.PodGroupSchedulingPolicy{Basic: &schedulingv1beta1.BasicSchedulingPolicy{}},
			DisruptionMode:    &schedulingv1beta1.DisruptionMode{All: &schedulingv1beta1.AllDisruptionMode{}},
			PriorityClassName: c.low,
		},
	}
	testenv.Create(t, cp.Client.SchedulingV1beta1().PodGroups(c.ns), pg)
	tmpl.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To(name)}
}

// createGang creates gang wave's PodGroup and its waveSize pods, all on one
// of the churn's schedulers, and returns the pods' names.
func (c *churn) createGang(ctx context.Context, rng *rand.Rand, wave int) (string, []string) {
	c.gangs.waves.Add(1)
	name := fmt.Sprintf("gang-%d", wave)
	n := c.cfg.waveSize
	pg := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.ns},
		Spec: schedulingv1beta1.PodGroupSpec{
			SchedulingPolicy:  schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: int32(n)}},
			PriorityClassName: c.high,
		},
	}
	if _, err := c.runner.SchedulingV1beta1().PodGroups(c.ns).Create(ctx, pg, metav1.CreateOptions{}); err != nil {
		return name, nil
	}
	sched := c.scheds[rng.IntN(2)]
	var names []string
	for i := range n {
		pod := testobj.MakePod().Name(fmt.Sprintf("%s-%d", name, i)).Label("role", "preemptor").Label("gang", name).
			SchedulerName(sched).PriorityClass(c.high).GracePeriod(0).OnNodes(c.nodes...).Container("app", c.cfg.preemptorCPU).Obj()
		pod.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To(name)}
		if _, err := c.runner.CoreV1().Pods(c.ns).Create(ctx, pod, metav1.CreateOptions{}); err == nil {
			names = append(names, pod.Name)
		}
	}
	return name, names
}

// deleteGang deletes gang name's PodGroup once its pods are gone, and
// counts it bound when every pod of it was.
func (c *churn) deleteGang(ctx context.Context, name string, bound, pods int) {
	if pods > 0 && bound == pods {
		c.gangs.bound.Add(1)
	}
	_ = c.runner.SchedulingV1beta1().PodGroups(c.ns).Delete(ctx, name, metav1.DeleteOptions{})
}
