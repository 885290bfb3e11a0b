package budget

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"sort"
	"strings"

	"github.com/distribution/reference"
	v1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/pkg/fieldpath"
	hashutil "k8s.io/kubernetes/pkg/util/hash"
)

// Whether a pod's spec and status agree, as OpenKruise decides it before a
// pod counts as available to a PodUnavailableBudget (kruise master
// 07169cfac: pkg/control/pubcontrol/pub_control.go IsPodStateConsistent,
// pkg/util/inplaceupdate/inplace_update_defaults.go
// DefaultCheckInPlaceUpdateCompleted, pkg/control/sidecarcontrol
// IsSidecarContainerUpdateCompleted). A pod whose containers are still being
// updated in place is Ready by its old containers only: Kruise's controller
// does not count it available, and its webhook lets it go without spending
// the PUB.

// Pod annotations and environment Kruise's in-place updates write.
const (
	// AnnotationInPlaceUpdateState is the state of the pod's last in-place
	// update (InPlaceUpdateState, JSON).
	AnnotationInPlaceUpdateState = "apps.kruise.io/inplace-update-state"
	// AnnotationInPlaceUpdateGrace is set while an in-place update waits
	// out its grace period, before the spec is changed.
	AnnotationInPlaceUpdateGrace = "apps.kruise.io/inplace-update-grace"
	// AnnotationRuntimeContainersMeta is what kruise-daemon reports of the
	// running containers (IDs and hashes, JSON).
	AnnotationRuntimeContainersMeta = "apps.kruise.io/runtime-containers-meta"
	// AnnotationSidecarSetInjectedList names the SidecarSets injected into
	// the pod, comma separated.
	AnnotationSidecarSetInjectedList = "kruise.io/sidecarset-injected-list"
	// AnnotationSidecarSetInPlaceUpdateState is the in-place update state
	// of the pod's sidecars, per SidecarSet (JSON).
	AnnotationSidecarSetInPlaceUpdateState = "kruise.io/sidecarset-inplace-update-state"

	// The names Kruise releases before v1.0 wrote, which it still reads.
	annotationInPlaceUpdateStateOld = "inplace-update-state"
	annotationInPlaceUpdateGraceOld = "inplace-update-grace"

	// sidecarEnvKey set to "true" marks a container a SidecarSet injected.
	sidecarEnvKey = "IS_INJECTED"
)

// inPlaceUpdateState is the part of Kruise's InPlaceUpdateState
// (apis/apps/pub) that the consistency check reads.
type inPlaceUpdateState struct {
	LastContainerStatuses    map[string]struct{ ImageID string } `json:"lastContainerStatuses"`
	UpdateEnvFromMetadata    bool                                `json:"updateEnvFromMetadata,omitempty"`
	NextContainerImages      map[string]string                   `json:"nextContainerImages,omitempty"`
	NextContainerRefMetadata map[string]json.RawMessage          `json:"nextContainerRefMetadata,omitempty"`
	NextContainerResources   map[string]json.RawMessage          `json:"nextContainerResources,omitempty"`
}

// runtimeContainerMeta is one container of Kruise's RuntimeContainerMetaSet.
type runtimeContainerMeta struct {
	Name        string `json:"name"`
	ContainerID string `json:"containerID"`
	Hashes      struct {
		PlainHash                    uint64 `json:"plainHash"`
		ExtractedEnvFromMetadataHash uint64 `json:"extractedEnvFromMetadataHash,omitempty"`
	} `json:"hashes"`
}

// PodStateConsistent reports whether pod's spec and status agree, as
// OpenKruise's IsPodStateConsistent does:
//   - when every container's image is a digest, whether each container's
//     status.containerStatuses imageID is that digest (same repository);
//     nothing else is checked then;
//   - otherwise, when SidecarSets injected containers (annotation
//     kruise.io/sidecarset-injected-list, containers with IS_INJECTED=true),
//     whether none of them still runs the image its SidecarSet's in-place
//     update replaced (kruise.io/sidecarset-inplace-update-state);
//   - and whether the pod's own in-place update is complete: not in its grace
//     period (apps.kruise.io/inplace-update-grace), no containers left for
//     next batches, the environment taken from metadata applied where the
//     update changed it, and each container recorded in
//     apps.kruise.io/inplace-update-state runs a new image (or its runtime
//     hashes in apps.kruise.io/runtime-containers-meta match the spec).
//
// An annotation that does not parse makes the pod inconsistent, as in
// Kruise. Kruise's check of resources resized in place
// (InPlaceWorkloadVerticalScaling, an alpha feature gate off by default) is
// left out.
func PodStateConsistent(pod *v1.Pod) bool {
	allDigest := true
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if !imageIsDigest(c.Image) {
			allDigest = false
			continue
		}
		if !containerRunsDigest(pod, c) {
			return false
		}
	}
	if allDigest {
		return true
	}
	if !sidecarUpdateCompleted(pod) {
		return false
	}
	return inPlaceUpdateCompleted(pod) == nil
}

// parseImage splits an image reference into repository, tag and digest, as
// Kruise's util.ParseImage does.
func parseImage(image string) (repo, tag, digest string, err error) {
	ref, err := reference.Parse(image)
	if err != nil {
		return "", "", "", err
	}
	if named, ok := ref.(reference.Named); ok {
		repo = named.Name()
	}
	if tagged, ok := ref.(reference.Tagged); ok {
		tag = tagged.Tag()
	}
	if digested, ok := ref.(reference.Digested); ok {
		digest = digested.Digest().String()
	}
	return repo, tag, digest, nil
}

func imageIsDigest(image string) bool {
	if !strings.Contains(image, "@") {
		return false // no digest; spares the parse
	}
	_, _, digest, _ := parseImage(image)
	return digest != ""
}

// imagesEqual is Kruise's IsContainerImageEqual: two digests compare by
// repository and digest, anything else by repository and tag.
func imagesEqual(a, b string) bool {
	repoA, tagA, digestA, err := parseImage(a)
	if err != nil {
		return false
	}
	repoB, tagB, digestB, err := parseImage(b)
	if err != nil {
		return false
	}
	if digestA != "" && digestB != "" {
		return repoA == repoB && digestA == digestB
	}
	return repoA == repoB && tagA == tagB
}

// containerRunsDigest is Kruise's IsPodContainerDigestEqual for one
// container whose image is a digest: its status's imageID (without a
// "docker-pullable://" style prefix) is the same image.
func containerRunsDigest(pod *v1.Pod, c *v1.Container) bool {
	for i := range pod.Status.ContainerStatuses {
		cs := &pod.Status.ContainerStatuses[i]
		if cs.Name != c.Name {
			continue
		}
		imageID := cs.ImageID
		if _, after, ok := strings.Cut(imageID, "://"); ok {
			imageID = after
		}
		return imagesEqual(c.Image, imageID)
	}
	return false
}

// sidecarUpdateCompleted is Kruise's IsSidecarContainerUpdateCompleted for
// the pod's injected sidecars; true when the pod has none.
func sidecarUpdateCompleted(pod *v1.Pod) bool {
	var sets []string
	if list := pod.Annotations[AnnotationSidecarSetInjectedList]; list != "" {
		sets = strings.Split(list, ",")
		sort.Strings(sets) // Kruise merges them in order of name
	}
	sidecars := map[string]bool{}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		for _, env := range c.Env {
			if env.Name == sidecarEnvKey {
				if env.Value == "true" {
					sidecars[c.Name] = true
				}
				break
			}
		}
	}
	if len(sets) == 0 || len(sidecars) == 0 {
		return true
	}
	raw, ok := pod.Annotations[AnnotationSidecarSetInPlaceUpdateState]
	if !ok {
		return true
	}
	var states map[string]*inPlaceUpdateState
	if err := json.Unmarshal([]byte(raw), &states); err != nil {
		return false
	}
	last := map[string]string{}
	for _, name := range sets {
		if st := states[name]; st != nil {
			for c, s := range st.LastContainerStatuses {
				last[c] = s.ImageID
			}
		}
	}
	return !runsReplacedImage(pod, sidecars, last, false)
}

// runsReplacedImage reports whether a container of pod (of only, when it is
// not nil) still runs the image an in-place update replaced: its status has
// the imageID recorded before the update, and its spec another image.
// latest compares an image without a tag as ":latest", as Kruise's check of
// the pod's own update does. Each container found is deleted from last.
func runsReplacedImage(pod *v1.Pod, only map[string]bool, last map[string]string, latest bool) bool {
	images := make(map[string]string, len(pod.Spec.Containers))
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		images[c.Name] = c.Image
		if latest && len(strings.Split(c.Image, ":")) <= 1 {
			images[c.Name] = c.Image + ":latest"
		}
	}
	for i := range pod.Status.ContainerStatuses {
		cs := &pod.Status.ContainerStatuses[i]
		if only != nil && !only[cs.Name] {
			continue
		}
		old, ok := last[cs.Name]
		if !ok {
			continue
		}
		if old == cs.ImageID && images[cs.Name] != cs.Image {
			return true
		}
		delete(last, cs.Name)
	}
	return false
}

// inPlaceUpdateCompleted is Kruise's DefaultCheckInPlaceUpdateCompleted:
// nil when the pod's in-place update is complete or it has none.
func inPlaceUpdateCompleted(pod *v1.Pod) error {
	if annotation(pod, AnnotationInPlaceUpdateGrace, annotationInPlaceUpdateGraceOld) {
		return fmt.Errorf("still in grace period of in-place update")
	}
	raw, ok := pod.Annotations[AnnotationInPlaceUpdateState]
	if !ok {
		if raw, ok = pod.Annotations[annotationInPlaceUpdateStateOld]; !ok {
			return nil
		}
	}
	var st inPlaceUpdateState
	if err := json.Unmarshal([]byte(raw), &st); err != nil {
		return err
	}
	if len(st.NextContainerImages)+len(st.NextContainerRefMetadata)+len(st.NextContainerResources) > 0 {
		return fmt.Errorf("containers left to update in place in next batches")
	}
	var metas []runtimeContainerMeta
	if raw, ok := pod.Annotations[AnnotationRuntimeContainersMeta]; ok {
		var set struct {
			Containers []runtimeContainerMeta `json:"containers"`
		}
		if err := json.Unmarshal([]byte(raw), &set); err != nil {
			return err
		}
		if set.Containers == nil {
			set.Containers = []runtimeContainerMeta{}
		}
		metas = set.Containers
	}
	if st.UpdateEnvFromMetadata {
		if metas == nil {
			return fmt.Errorf("waiting for all containers hash consistent, but runtime-container-meta not found")
		}
		if !containerHashesMatch(pod, metas, true) {
			return fmt.Errorf("waiting for all containers hash consistent")
		}
	}
	if metas != nil && containerHashesMatch(pod, metas, false) {
		return nil
	}
	last := make(map[string]string, len(st.LastContainerStatuses))
	for c, s := range st.LastContainerStatuses {
		last[c] = s.ImageID
	}
	if runsReplacedImage(pod, nil, last, true) {
		return fmt.Errorf("a container's imageID has not changed")
	}
	if len(last) > 0 {
		return fmt.Errorf("no status of containers %v", last)
	}
	return nil
}

func annotation(pod *v1.Pod, keys ...string) bool {
	for _, k := range keys {
		if _, ok := pod.Annotations[k]; ok {
			return true
		}
	}
	return false
}

// containerHashesMatch is Kruise's checkAllContainersHashConsistent: every
// container of the spec has a status and a runtime meta with the same
// container ID, and the meta's hash is the spec's (the plain hash, as
// kubelet computes it now or before 1.31; or, with env, the hash of the
// environment taken from the pod's labels and annotations).
func containerHashesMatch(pod *v1.Pod, metas []runtimeContainerMeta, env bool) bool {
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		var status *v1.ContainerStatus
		for j := range pod.Status.ContainerStatuses {
			if pod.Status.ContainerStatuses[j].Name == c.Name {
				status = &pod.Status.ContainerStatuses[j]
				break
			}
		}
		var meta *runtimeContainerMeta
		for j := range metas {
			if metas[j].Name == c.Name {
				meta = &metas[j]
			}
		}
		if status == nil || meta == nil || meta.ContainerID != status.ContainerID {
			return false
		}
		if env {
			if meta.Hashes.ExtractedEnvFromMetadataHash != envFromMetadataHash(pod, c) {
				return false
			}
			continue
		}
		if meta.Hashes.PlainHash != hashJSON(map[string]string{"name": c.Name, "image": c.Image}) &&
			meta.Hashes.PlainHash != hashJSON(c) {
			return false
		}
	}
	return true
}

// hashJSON is kubelet's container hash: FNV-32a over v's JSON, dumped as
// hashutil.DeepHashObject does. Since Kubernetes 1.31 kubelet hashes the
// container's name and image only, before it the whole container.
func hashJSON(v any) uint64 {
	h := fnv.New32a()
	data, _ := json.Marshal(v)
	hashutil.DeepHashObject(h, data)
	return uint64(h.Sum32())
}

// envFromMetadataHash is Kruise's EnvFromMetadataHasher.GetExpectHash: the
// hash of c's environment variables taken from the pod's labels or
// annotations (metadata.labels['k'], metadata.annotations['k']), by name,
// without SidecarSet's version variables.
func envFromMetadataHash(pod *v1.Pod, c *v1.Container) uint64 {
	var envs []v1.EnvVar
	for _, e := range c.Env {
		if e.Value != "" || e.ValueFrom == nil || e.ValueFrom.FieldRef == nil ||
			e.Name == "SIDECARSET_VERSION" || e.Name == "SIDECARSET_VERSION_ALT" {
			continue
		}
		path, key, ok := fieldpath.SplitMaybeSubscriptedPath(e.ValueFrom.FieldRef.FieldPath)
		if !ok {
			continue
		}
		env := v1.EnvVar{Name: e.Name}
		switch path {
		case "metadata.annotations":
			env.Value = pod.Annotations[key]
		case "metadata.labels":
			env.Value = pod.Labels[key]
		default:
			continue
		}
		envs = append(envs, env)
	}
	sort.SliceStable(envs, func(i, j int) bool { return envs[i].Name < envs[j].Name })
	return hashJSON(envs)
}
