package sandbox

import (
	"fmt"
	"hash/fnv"
	"runtime"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// This file holds the pure part of the simulated kubelet: what a Node's and a
// Pod's status should be. kubelet.go reads the objects and writes the results.

// notReadyTaintKey is the taint that admission puts on new Nodes and that a
// real kubelet's node lifecycle removes once the node is Ready.
const notReadyTaintKey = "node.kubernetes.io/not-ready"

// DefaultNodeCapacity returns the capacity that a Node gets for each resource
// that its status does not already list: 4 CPUs, 16Gi of memory, 110 pods.
func DefaultNodeCapacity() corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("4"),
		corev1.ResourceMemory: resource.MustParse("16Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
}

// desiredNodeMeta returns node without the not-ready taint and with the
// well-known hostname, os and arch labels where they are missing, and whether
// that differs from node.
func desiredNodeMeta(node *corev1.Node) (*corev1.Node, bool) {
	n := node.DeepCopy()
	var taints []corev1.Taint
	for _, t := range n.Spec.Taints {
		if t.Key != notReadyTaintKey {
			taints = append(taints, t)
		}
	}
	n.Spec.Taints = taints
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	for k, v := range map[string]string{
		corev1.LabelHostname:   n.Name,
		corev1.LabelOSStable:   "linux",
		corev1.LabelArchStable: runtime.GOARCH,
	} {
		if _, ok := n.Labels[k]; !ok {
			n.Labels[k] = v
		}
	}
	changed := len(n.Spec.Taints) != len(node.Spec.Taints) || len(n.Labels) != len(node.Labels)
	return n, changed
}

// desiredNodeStatus returns node with the status of a Ready node: each
// resource of capacity that the status lacks, allocatable equal to capacity
// where not given, Ready and no pressure conditions, and a fake address.
func desiredNodeStatus(node *corev1.Node, capacity corev1.ResourceList, now time.Time) (*corev1.Node, bool) {
	n := node.DeepCopy()
	st := &n.Status
	if st.Capacity == nil {
		st.Capacity = corev1.ResourceList{}
	}
	for r, q := range capacity {
		if _, ok := st.Capacity[r]; !ok {
			st.Capacity[r] = q.DeepCopy()
		}
	}
	if st.Allocatable == nil {
		st.Allocatable = corev1.ResourceList{}
	}
	for r, q := range st.Capacity {
		if _, ok := st.Allocatable[r]; !ok {
			st.Allocatable[r] = q.DeepCopy()
		}
	}
	ts := metav1.NewTime(now).Rfc3339Copy()
	st.Conditions = setNodeCondition(st.Conditions, corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "sandbox kubelet is posting ready status", ts)
	st.Conditions = setNodeCondition(st.Conditions, corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "sandbox kubelet has sufficient memory available", ts)
	st.Conditions = setNodeCondition(st.Conditions, corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "sandbox kubelet has no disk pressure", ts)
	st.Conditions = setNodeCondition(st.Conditions, corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "sandbox kubelet has sufficient PID available", ts)
	if len(st.Addresses) == 0 {
		st.Addresses = []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: fakeIP("10.240", n.Name)},
			{Type: corev1.NodeHostName, Address: n.Name},
		}
	}
	if st.NodeInfo.KubeletVersion == "" {
		st.NodeInfo.KubeletVersion = "sandbox"
		st.NodeInfo.OperatingSystem = "linux"
		st.NodeInfo.Architecture = runtime.GOARCH
	}
	return n, !apiequality.Semantic.DeepEqual(node.Status, n.Status)
}

// setNodeCondition sets the condition of type t. It keeps the transition and
// heartbeat times when the status does not change.
func setNodeCondition(conds []corev1.NodeCondition, t corev1.NodeConditionType, status corev1.ConditionStatus, reason, message string, now metav1.Time) []corev1.NodeCondition {
	for i := range conds {
		if conds[i].Type != t {
			continue
		}
		if conds[i].Status != status {
			conds[i].LastTransitionTime = now
			conds[i].LastHeartbeatTime = now
		}
		conds[i].Status, conds[i].Reason, conds[i].Message = status, reason, message
		return conds
	}
	return append(conds, corev1.NodeCondition{
		Type: t, Status: status, Reason: reason, Message: message,
		LastHeartbeatTime: now, LastTransitionTime: now,
	})
}

// podRun is what the kubelet knows about a running pod beyond the object:
// since when it has seen the current readiness value, and the restart count
// then.
type podRun struct {
	mode     readinessMode
	since    time.Time
	restarts int32
}

// desiredPodStatus returns pod with the status of a running pod on hostIP, and
// when the status will next change by itself (0 for never).
func desiredPodStatus(pod *corev1.Pod, run podRun, hostIP string, crashLoopInterval time.Duration, now time.Time) (*corev1.Pod, time.Duration) {
	p := pod.DeepCopy()
	st := &p.Status
	ts := metav1.NewTime(now).Rfc3339Copy()

	var next time.Duration
	containersReady, restarts := false, int32(0)
	switch run.mode.kind {
	case kindReady:
		containersReady = true
	case kindAfter:
		readyAt := run.since.Add(run.mode.after)
		containersReady = !now.Before(readyAt)
		if !containersReady {
			next = readyAt.Sub(now)
		}
	case kindCrashLoop:
		elapsed := now.Sub(run.since)
		restarts = run.restarts + int32(elapsed/crashLoopInterval)
		next = crashLoopInterval - elapsed%crashLoopInterval
	}

	st.Phase = corev1.PodRunning
	st.HostIP = hostIP
	st.HostIPs = []corev1.HostIP{{IP: hostIP}}
	if st.PodIP == "" {
		st.PodIP = fakeIP("10.244", string(p.UID))
		st.PodIPs = []corev1.PodIP{{IP: st.PodIP}}
	}
	if st.StartTime == nil {
		st.StartTime = &ts
	}

	st.InitContainerStatuses = containerStatuses(p.Spec.InitContainers, st.InitContainerStatuses, p.UID, *st.StartTime, true, true, 0, false)
	st.ContainerStatuses = containerStatuses(p.Spec.Containers, st.ContainerStatuses, p.UID, *st.StartTime, false, containersReady, restarts, run.mode.kind == kindCrashLoop)

	ready := containersReady
	var notReady []string
	if !containersReady {
		for _, c := range p.Spec.Containers {
			notReady = append(notReady, c.Name)
		}
	}
	var missingGates []string
	for _, g := range p.Spec.ReadinessGates {
		if !podConditionTrue(st.Conditions, g.ConditionType) {
			missingGates = append(missingGates, string(g.ConditionType))
		}
	}
	if len(missingGates) > 0 {
		ready = false
	}

	st.Conditions = setPodCondition(st.Conditions, corev1.PodReadyToStartContainers, true, "", "", ts)
	st.Conditions = setPodCondition(st.Conditions, corev1.PodInitialized, true, "", "", ts)
	st.Conditions = setPodCondition(st.Conditions, corev1.PodScheduled, true, "", "", ts)
	if containersReady {
		st.Conditions = setPodCondition(st.Conditions, corev1.ContainersReady, true, "", "", ts)
	} else {
		st.Conditions = setPodCondition(st.Conditions, corev1.ContainersReady, false, "ContainersNotReady",
			fmt.Sprintf("containers with unready status: [%s]", strings.Join(notReady, " ")), ts)
	}
	switch {
	case ready:
		st.Conditions = setPodCondition(st.Conditions, corev1.PodReady, true, "", "", ts)
	case !containersReady:
		st.Conditions = setPodCondition(st.Conditions, corev1.PodReady, false, "ContainersNotReady",
			fmt.Sprintf("containers with unready status: [%s]", strings.Join(notReady, " ")), ts)
	default:
		st.Conditions = setPodCondition(st.Conditions, corev1.PodReady, false, "ReadinessGatesNotReady",
			fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", strings.Join(missingGates, ", ")), ts)
	}
	return p, next
}

// containerStatuses returns the statuses of containers. Regular containers
// run (and are Ready if ready) or, with crashLoop, wait in CrashLoopBackOff
// after restarts restarts. Init containers (init) have completed, except
// sidecars (restartPolicy Always), which run and are Ready.
func containerStatuses(containers []corev1.Container, old []corev1.ContainerStatus, uid types.UID, started metav1.Time, init, ready bool, restarts int32, crashLoop bool) []corev1.ContainerStatus {
	if len(containers) == 0 {
		return old
	}
	byName := map[string]corev1.ContainerStatus{}
	for _, s := range old {
		byName[s.Name] = s
	}
	out := make([]corev1.ContainerStatus, 0, len(containers))
	for _, c := range containers {
		s := byName[c.Name]
		s.Name, s.Image = c.Name, c.Image
		s.ImageID = "sandbox://" + c.Image
		s.ContainerID = "sandbox://" + string(uid) + "/" + c.Name
		sidecar := c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
		switch {
		case init && !sidecar:
			s.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: started, FinishedAt: started}}
			s.Ready, s.Started = true, ptr.To(false)
		case init:
			s.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}
			s.Ready, s.Started = true, ptr.To(true)
		case crashLoop:
			s.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
				Reason:  "CrashLoopBackOff",
				Message: fmt.Sprintf("back-off restarting failed container %s (sandbox crashloop)", c.Name),
			}}
			if restarts > s.RestartCount {
				s.RestartCount = restarts
			}
			if s.RestartCount > 0 {
				s.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}
			}
			s.Ready, s.Started = false, ptr.To(false)
		default:
			s.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}
			s.Ready, s.Started = ready, ptr.To(true)
		}
		out = append(out, s)
	}
	return out
}

func podConditionTrue(conds []corev1.PodCondition, t corev1.PodConditionType) bool {
	for _, c := range conds {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// setPodCondition sets the condition of type t, keeping its transition time
// when the status does not change.
func setPodCondition(conds []corev1.PodCondition, t corev1.PodConditionType, status bool, reason, message string, now metav1.Time) []corev1.PodCondition {
	s := corev1.ConditionFalse
	if status {
		s = corev1.ConditionTrue
	}
	for i := range conds {
		if conds[i].Type != t {
			continue
		}
		if conds[i].Status != s {
			conds[i].LastTransitionTime = now
		}
		conds[i].Status, conds[i].Reason, conds[i].Message = s, reason, message
		return conds
	}
	return append(conds, corev1.PodCondition{Type: t, Status: s, Reason: reason, Message: message, LastTransitionTime: now})
}

// fakeIP returns an address in prefix (two octets, e.g. "10.244") derived
// from key. It only has to look like an address; collisions do no harm here.
func fakeIP(prefix, key string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	sum := h.Sum32()
	return fmt.Sprintf("%s.%d.%d", prefix, (sum>>8)&0xff, (sum&0xff)%254+1)
}
