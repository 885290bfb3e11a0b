package sandbox

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/budgetguard/budgetguard/internal/testenv"
	"github.com/budgetguard/budgetguard/internal/testobj"
)

func TestParseReadiness(t *testing.T) {
	tests := []struct {
		value   string
		want    readinessMode
		wantErr bool
	}{
		{value: "", want: readinessMode{kind: kindReady}},
		{value: ReadinessReady, want: readinessMode{kind: kindReady}},
		{value: ReadinessNever, want: readinessMode{kind: kindNever}},
		{value: ReadinessCrashLoop, want: readinessMode{kind: kindCrashLoop}},
		{value: "after=5s", want: readinessMode{kind: kindAfter, after: 5 * time.Second}},
		{value: ReadinessAfter(1500 * time.Millisecond), want: readinessMode{kind: kindAfter, after: 1500 * time.Millisecond}},
		{value: " never ", want: readinessMode{kind: kindNever}},
		{value: "after=-1s", want: readinessMode{kind: kindNever}, wantErr: true},
		{value: "after=soon", want: readinessMode{kind: kindNever}, wantErr: true},
		{value: "Ready", want: readinessMode{kind: kindNever}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			got, err := parseReadiness(tt.value)
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseReadiness(%q) error = %v, want error %v", tt.value, err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("parseReadiness(%q) = %+v, want %+v", tt.value, got, tt.want)
			}
		})
	}
}

// testPod is a pending pod bound to n1, with an init container and an app
// container.
func testPod() *corev1.Pod {
	return testobj.MakePod().Namespace("ns").Name("p").UID("uid-1").Node("n1").InitContainer("init").Container("app", "").Phase(corev1.PodPending).Obj()
}

func TestDesiredPodStatus(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	interval := 2 * time.Second
	tests := []struct {
		name         string
		mode         readinessMode
		restarts     int32
		elapsed      time.Duration
		wantReady    corev1.ConditionStatus
		wantNext     time.Duration
		wantRestarts int32
		wantWaiting  bool
	}{
		{name: "ready", mode: readinessMode{kind: kindReady}, wantReady: corev1.ConditionTrue},
		{name: "never", mode: readinessMode{kind: kindNever}, elapsed: time.Hour, wantReady: corev1.ConditionFalse},
		{name: "after, not yet", mode: readinessMode{kind: kindAfter, after: 5 * time.Second}, elapsed: 2 * time.Second,
			wantReady: corev1.ConditionFalse, wantNext: 3 * time.Second},
		{name: "after, due", mode: readinessMode{kind: kindAfter, after: 5 * time.Second}, elapsed: 5 * time.Second,
			wantReady: corev1.ConditionTrue},
		{name: "crashloop, fresh", mode: readinessMode{kind: kindCrashLoop}, elapsed: 500 * time.Millisecond,
			wantReady: corev1.ConditionFalse, wantNext: 1500 * time.Millisecond, wantWaiting: true},
		{name: "crashloop, later", mode: readinessMode{kind: kindCrashLoop}, restarts: 3, elapsed: 5 * time.Second,
			wantReady: corev1.ConditionFalse, wantNext: time.Second, wantRestarts: 5, wantWaiting: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := testPod()
			run := podRun{mode: tt.mode, since: start, restarts: tt.restarts}
			got, next := desiredPodStatus(pod, run, "10.240.0.1", interval, start.Add(tt.elapsed))
			if got.Status.Phase != corev1.PodRunning {
				t.Errorf("phase = %s, want Running", got.Status.Phase)
			}
			if r := testenv.PodCondition(got, corev1.PodReady); r != tt.wantReady {
				t.Errorf("Ready = %s, want %s", r, tt.wantReady)
			}
			if r := testenv.PodCondition(got, corev1.ContainersReady); r != tt.wantReady {
				t.Errorf("ContainersReady = %s, want %s", r, tt.wantReady)
			}
			for _, c := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized} {
				if r := testenv.PodCondition(got, c); r != corev1.ConditionTrue {
					t.Errorf("%s = %s, want True", c, r)
				}
			}
			if next != tt.wantNext {
				t.Errorf("next change in %s, want %s", next, tt.wantNext)
			}
			cs := got.Status.ContainerStatuses[0]
			if cs.RestartCount != tt.wantRestarts {
				t.Errorf("restartCount = %d, want %d", cs.RestartCount, tt.wantRestarts)
			}
			if waiting := cs.State.Waiting != nil; waiting != tt.wantWaiting {
				t.Errorf("container waiting = %v, want %v (state %+v)", waiting, tt.wantWaiting, cs.State)
			}
			if cs.Ready != (tt.wantReady == corev1.ConditionTrue) {
				t.Errorf("container ready = %v, want %v", cs.Ready, tt.wantReady)
			}
			if got.Status.InitContainerStatuses[0].State.Terminated == nil {
				t.Errorf("init container state = %+v, want terminated", got.Status.InitContainerStatuses[0].State)
			}
			if got.Status.PodIP == "" || got.Status.HostIP != "10.240.0.1" {
				t.Errorf("podIP = %q, hostIP = %q, want a pod IP and host IP 10.240.0.1", got.Status.PodIP, got.Status.HostIP)
			}
		})
	}
}

// A second sync with nothing new must not change the status, or the kubelet
// would write it forever.
func TestDesiredPodStatusIsStable(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, mode := range []readinessMode{{kind: kindReady}, {kind: kindNever}, {kind: kindCrashLoop}, {kind: kindAfter, after: time.Minute}} {
		run := podRun{mode: mode, since: start}
		first, _ := desiredPodStatus(testPod(), run, "10.240.0.1", time.Hour, start.Add(1234*time.Millisecond))
		second, _ := desiredPodStatus(first, run, "10.240.0.1", time.Hour, start.Add(1500*time.Millisecond))
		if diff := cmp.Diff(first.Status, second.Status); diff != "" {
			t.Errorf("mode %+v: status changed on a second sync (-first,+second):\n%s", mode, diff)
		}
	}
}

func TestDesiredPodStatusReadinessGates(t *testing.T) {
	pod := testPod()
	pod.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "example.com/gate"}}
	got, _ := desiredPodStatus(pod, podRun{mode: readinessMode{kind: kindReady}}, "10.240.0.1", time.Second, time.Now())
	if r := testenv.PodCondition(got, corev1.PodReady); r != corev1.ConditionFalse {
		t.Errorf("Ready = %s with an unmet readiness gate, want False", r)
	}
	got.Status.Conditions = append(got.Status.Conditions, corev1.PodCondition{Type: "example.com/gate", Status: corev1.ConditionTrue})
	got, _ = desiredPodStatus(got, podRun{mode: readinessMode{kind: kindReady}}, "10.240.0.1", time.Second, time.Now())
	if r := testenv.PodCondition(got, corev1.PodReady); r != corev1.ConditionTrue {
		t.Errorf("Ready = %s with the readiness gate met, want True", r)
	}
}

func TestDesiredNodeStatus(t *testing.T) {
	node := testobj.MakeNode().Name("n1").Obj()
	node.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")} // and no allocatable
	got, changed := desiredNodeStatus(node, DefaultNodeCapacity(), time.Now())
	if !changed {
		t.Fatal("desiredNodeStatus reported no change for a new node")
	}
	want := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("8"),
		corev1.ResourceMemory: resource.MustParse("16Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	for name, list := range map[string]corev1.ResourceList{"capacity": got.Status.Capacity, "allocatable": got.Status.Allocatable} {
		if len(list) != len(want) {
			t.Errorf("%s = %v, want %v", name, list, want)
		}
		for r, q := range want {
			if g := list[r]; g.Cmp(q) != 0 {
				t.Errorf("%s[%s] = %s, want %s", name, r, g.String(), q.String())
			}
		}
	}
	ready := false
	for _, c := range got.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			ready = true
		}
	}
	if !ready {
		t.Errorf("conditions = %+v, want Ready True", got.Status.Conditions)
	}
	if _, changed := desiredNodeStatus(got, DefaultNodeCapacity(), time.Now().Add(time.Minute)); changed {
		t.Error("desiredNodeStatus changed a node that is already Ready")
	}
}

func TestDesiredNodeMeta(t *testing.T) {
	dedicated := corev1.Taint{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}
	node := testobj.MakeNode().Name("n1").Label(corev1.LabelArchStable, "arm64").Taint(notReadyTaintKey, corev1.TaintEffectNoSchedule).Obj()
	node.Spec.Taints = append(node.Spec.Taints, dedicated)
	got, changed := desiredNodeMeta(node)
	if !changed {
		t.Fatal("desiredNodeMeta reported no change")
	}
	if diff := cmp.Diff([]corev1.Taint{dedicated}, got.Spec.Taints); diff != "" {
		t.Errorf("taints (-want,+got):\n%s", diff)
	}
	wantLabels := map[string]string{corev1.LabelArchStable: "arm64", corev1.LabelHostname: "n1", corev1.LabelOSStable: "linux"}
	if diff := cmp.Diff(wantLabels, got.Labels); diff != "" {
		t.Errorf("labels (-want,+got):\n%s", diff)
	}
	if _, changed := desiredNodeMeta(got); changed {
		t.Error("desiredNodeMeta changed a node a second time")
	}
}

func TestSidecarInitContainerRuns(t *testing.T) {
	pod := testPod()
	pod.Spec.InitContainers[0].RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
	got, _ := desiredPodStatus(pod, podRun{mode: readinessMode{kind: kindReady}}, "10.240.0.1", time.Second, time.Now())
	if got.Status.InitContainerStatuses[0].State.Running == nil {
		t.Errorf("sidecar state = %+v, want running", got.Status.InitContainerStatuses[0].State)
	}
}
