package budget

import (
	"testing"

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
