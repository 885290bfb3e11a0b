package budget

import (
	"strconv"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// The cases follow OpenKruise's IsPodStateConsistent and the checks it calls
// (pkg/control/pubcontrol, pkg/util/inplaceupdate, pkg/control/sidecarcontrol
// at kruise master 07169cfac, and the cases of
// pkg/webhook/pod/validating/pod_unavailable_budget_test.go).
func TestPodStateConsistent(t *testing.T) {
	const (
		digestA = "sha256:" + "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		digestB = "sha256:" + "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
		// kubeletHashApp is kubelet's HashContainer (1.31 and later) of
		// the container app with image web:2, as
		// k8s.io/kubernetes/pkg/kubelet/container of v1.36.3 computes it.
		kubeletHashApp = "863474606"
	)
	// pod has one container app running image (its spec), with the
	// status's image and imageID given.
	pod := func(spec, statusImage, imageID string, annotations map[string]string) *v1.Pod {
		p := webPod("a").Annotations(annotations).Obj()
		p.Spec.Containers = []v1.Container{{Name: "app", Image: spec}}
		p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "app", Image: statusImage, ImageID: imageID, ContainerID: "containerd://app-1", Ready: true}}
		return p
	}
	// withSidecar adds the injected container mesh to p, its spec image
	// spec, running image status with imageID.
	withSidecar := func(p *v1.Pod, spec, status, imageID string) *v1.Pod {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "mesh", Image: spec, Env: []v1.EnvVar{{Name: "IS_INJECTED", Value: "true"}}})
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, v1.ContainerStatus{Name: "mesh", Image: status, ImageID: imageID, Ready: true})
		return p
	}
	state := func(lastImageID string, extra string) map[string]string {
		return map[string]string{AnnotationInPlaceUpdateState: `{"revision":"r2","lastContainerStatuses":{"app":{"imageID":"` + lastImageID + `"}}` + extra + `}`}
	}
	with := func(m map[string]string, kv ...string) map[string]string {
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	meta := func(containerID string, plainHash string) string {
		return `{"containers":[{"name":"app","containerID":"` + containerID + `","hashes":{"plainHash":` + plainHash + `}}]}`
	}

	tests := []struct {
		name string
		pod  *v1.Pod
		want bool
	}{
		{"no in-place update, tagged image", pod("web:1", "web:1", "web@"+digestA, nil), true},
		{"no containers: every image a digest, as Kruise takes it", func() *v1.Pod {
			p := webPod("a").Annotation(AnnotationInPlaceUpdateGrace, "{}").Obj()
			p.Spec.Containers = nil
			return p
		}(), true},
		{"digest image that the status runs", pod("web@"+digestA, "web:1", "docker-pullable://web@"+digestA, nil), true},
		{"digest image the status does not run yet", pod("web@"+digestA, "web:1", "docker-pullable://web@"+digestB, nil), false},
		{"digest image of another repository", pod("web@"+digestA, "web:1", "other@"+digestA, nil), false},
		{"digest image without a container status", func() *v1.Pod {
			p := pod("web@"+digestA, "", "", nil)
			p.Status.ContainerStatuses = nil
			return p
		}(), false},
		{"all digests: nothing else is checked", pod("web@"+digestA, "web:1", "web@"+digestA, map[string]string{AnnotationInPlaceUpdateGrace: "{}"}), true},
		{"in-place update in its grace period", pod("web:2", "web:1", "web@"+digestA, map[string]string{AnnotationInPlaceUpdateGrace: "{}"}), false},
		{"in its grace period, older annotation", pod("web:2", "web:1", "web@"+digestA, map[string]string{"inplace-update-grace": "{}"}), false},
		{"in-place update: imageID not changed yet", pod("web:2", "web:1", "web@"+digestA, state("web@"+digestA, "")), false},
		{"in-place update: imageID changed", pod("web:2", "web:2", "web@"+digestB, state("web@"+digestA, "")), true},
		{"in-place update: same imageID, and the status names the spec's image", pod("web:2", "web:2", "web@"+digestA, state("web@"+digestA, "")), true},
		{"in-place update: an untagged image is :latest", pod("web", "web:latest", "web@"+digestA, state("web@"+digestA, "")), true},
		{"in-place update, older annotation", pod("web:2", "web:1", "web@"+digestA, map[string]string{"inplace-update-state": `{"lastContainerStatuses":{"app":{"imageID":"web@` + digestA + `"}}}`}), false},
		{"in-place update of a container without status", pod("web:2", "web:2", "web@"+digestB,
			map[string]string{AnnotationInPlaceUpdateState: `{"lastContainerStatuses":{"app":{"imageID":"web@` + digestA + `"},"gone":{"imageID":"x"}}}`}), false},
		{"containers left for next batches", pod("web:2", "web:2", "web@"+digestB, state("web@"+digestA, `,"nextContainerImages":{"side":"side:2"}`)), false},
		{"metadata left for next batches", pod("web:2", "web:2", "web@"+digestB, state("web@"+digestA, `,"nextContainerRefMetadata":{"side":{"labels":{"a":"b"}}}`)), false},
		{"resources left for next batches", pod("web:2", "web:2", "web@"+digestB, state("web@"+digestA, `,"nextContainerResources":{"side":{"limits":{"cpu":"1"}}}`)), false},
		{"in-place update state that does not parse", pod("web:1", "web:1", "web@"+digestA, map[string]string{AnnotationInPlaceUpdateState: "{"}), false},
		{"runtime meta with the spec's hash: complete though the imageID is the old one",
			pod("web:2", "web:1", "web@"+digestA, with(state("web@"+digestA, ""), AnnotationRuntimeContainersMeta, meta("containerd://app-1", kubeletHashApp))), true},
		{"runtime meta of another container ID: the images decide",
			pod("web:2", "web:1", "web@"+digestA, with(state("web@"+digestA, ""), AnnotationRuntimeContainersMeta, meta("containerd://app-0", kubeletHashApp))), false},
		{"runtime meta with another hash: the images decide",
			pod("web:2", "web:1", "web@"+digestA, with(state("web@"+digestA, ""), AnnotationRuntimeContainersMeta, meta("containerd://app-1", "1"))), false},
		{"runtime meta that does not parse", pod("web:2", "web:2", "web@"+digestB, with(state("web@"+digestA, ""), AnnotationRuntimeContainersMeta, "[")), false},
		{"environment from metadata to update, no runtime meta", pod("web:2", "web:2", "web@"+digestB, state("web@"+digestA, `,"updateEnvFromMetadata":true`)), false},
		{"sidecar still runs the image its update replaced",
			withSidecar(pod("web:1", "web:1", "web@"+digestA, map[string]string{
				AnnotationSidecarSetInjectedList:       "mesh-set",
				AnnotationSidecarSetInPlaceUpdateState: `{"mesh-set":{"lastContainerStatuses":{"mesh":{"imageID":"envoy@` + digestA + `"}}}}`,
			}), "envoy:v2", "envoy:v1", "envoy@"+digestA), false},
		{"sidecar runs its new image",
			withSidecar(pod("web:1", "web:1", "web@"+digestA, map[string]string{
				AnnotationSidecarSetInjectedList:       "mesh-set",
				AnnotationSidecarSetInPlaceUpdateState: `{"mesh-set":{"lastContainerStatuses":{"mesh":{"imageID":"envoy@` + digestA + `"}}}}`,
			}), "envoy:v2", "envoy:v2", "envoy@"+digestB), true},
		{"sidecar update of another SidecarSet is not read",
			withSidecar(pod("web:1", "web:1", "web@"+digestA, map[string]string{
				AnnotationSidecarSetInjectedList:       "mesh-set",
				AnnotationSidecarSetInPlaceUpdateState: `{"other-set":{"lastContainerStatuses":{"mesh":{"imageID":"envoy@` + digestA + `"}}}}`,
			}), "envoy:v2", "envoy:v1", "envoy@"+digestA), true},
		{"sidecar update state that does not parse",
			withSidecar(pod("web:1", "web:1", "web@"+digestA, map[string]string{
				AnnotationSidecarSetInjectedList:       "mesh-set",
				AnnotationSidecarSetInPlaceUpdateState: "{",
			}), "envoy:v2", "envoy:v2", "envoy@"+digestB), false},
		{"sidecar state without the injected list is not read",
			withSidecar(pod("web:1", "web:1", "web@"+digestA, map[string]string{
				AnnotationSidecarSetInPlaceUpdateState: "{",
			}), "envoy:v2", "envoy:v2", "envoy@"+digestB), true},
	}
	for _, tc := range tests {
		if got := PodStateConsistent(tc.pod); got != tc.want {
			t.Errorf("%s: PodStateConsistent = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestEnvFromMetadataHash: an in-place update that changed environment
// taken from the pod's metadata is complete once kruise-daemon reports the
// hash of that environment as the pod's labels and annotations give it now.
func TestEnvFromMetadataHash(t *testing.T) {
	p := webPod("a").Label("version", "2").Obj()
	p.Spec.Containers = []v1.Container{{Name: "app", Image: "web:2", Env: []v1.EnvVar{
		{Name: "VERSION", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels['version']"}}},
	}}}
	p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "app", Image: "web:2", ImageID: "web@sha256:" + strings.Repeat("b", 64), ContainerID: "containerd://app-1"}}
	stateWithEnv := `{"lastContainerStatuses":{"app":{"imageID":"web@sha256:` + strings.Repeat("a", 64) + `"}},"updateEnvFromMetadata":true}`
	metaWith := func(envHash uint64) string {
		return `{"containers":[{"name":"app","containerID":"containerd://app-1","hashes":{"plainHash":1,"extractedEnvFromMetadataHash":` +
			strconv.FormatUint(envHash, 10) + `}}]}`
	}
	// The hash Kruise's EnvFromMetadataHasher computes: FNV-32a over the
	// JSON of the extracted variables.
	want := hashJSON([]v1.EnvVar{{Name: "VERSION", Value: "2"}})
	p.Annotations = map[string]string{AnnotationInPlaceUpdateState: stateWithEnv, AnnotationRuntimeContainersMeta: metaWith(want)}
	if !PodStateConsistent(p) {
		t.Errorf("environment hash reported as the labels give it: PodStateConsistent = false, want true")
	}
	p.Labels["version"] = "3"
	if PodStateConsistent(p) {
		t.Errorf("label changed since kruise-daemon reported the hash: PodStateConsistent = true, want false")
	}
}
