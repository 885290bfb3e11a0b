package budget

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/budgetguard/budgetguard/internal/testobj"
)

// TestDisruptionPreconditions: every disruption names the pod's UID; one
// of a pod that spent no budget because it was not healthy also names the
// resourceVersion it was decided on, so that the pod cannot turn Ready and
// still go.
func TestDisruptionPreconditions(t *testing.T) {
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		want *metav1.Preconditions
	}{
		{"ready", webPod("a").ResourceVersion("7").Obj(), &metav1.Preconditions{UID: ptr.To(testobj.UIDOf("a"))}},
		{"not ready", webPod("a").ResourceVersion("7").Ready(false).Obj(), &metav1.Preconditions{UID: ptr.To(testobj.UIDOf("a")), ResourceVersion: ptr.To("7")}},
		{"pending", webPod("a").ResourceVersion("7").Phase(v1.PodPending).Obj(), &metav1.Preconditions{UID: ptr.To(testobj.UIDOf("a")), ResourceVersion: ptr.To("7")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, DisruptionPreconditions(tc.pod)); diff != "" {
				t.Errorf("DisruptionPreconditions (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestChangedOnlyByDisruptionMark: a pod decided on while not Ready that
// another disruptor has since marked (DisruptionTarget, a new
// resourceVersion) is still the pod decided on; one that also turned
// Ready, was relabelled, began terminating or was made again under its
// name is not.
func TestChangedOnlyByDisruptionMark(t *testing.T) {
	decided := webPod("a").ResourceVersion("7").Ready(false).Obj()
	marked := func() *testobj.PodWrapper {
		w := webPod("a").ResourceVersion("9").Ready(false).Condition(v1.DisruptionTarget, v1.ConditionTrue)
		w.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kube-apiserver", Subresource: "status"}}
		return w
	}
	for _, tc := range []struct {
		name    string
		current *v1.Pod
		want    bool
	}{
		{"unchanged", decided.DeepCopy(), true},
		{"marked", marked().Obj(), true},
		{"marked and Ready", marked().Ready(true).Obj(), false},
		{"marked and relabelled", marked().Label("app", "shop").Obj(), false},
		{"marked and terminating", marked().Terminating(time.Unix(1, 0)).Obj(), false},
		{"not Ready for another reason", webPod("a").ResourceVersion("9").Phase(v1.PodPending).Ready(false).Obj(), false},
		{"made again under the name", marked().UID("a2").Obj(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ChangedOnlyByDisruptionMark(decided, tc.current); got != tc.want {
				t.Errorf("ChangedOnlyByDisruptionMark = %v, want %v", got, tc.want)
			}
		})
	}
}
