package budget

import (
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Severity ranks a lint finding.
type Severity string

const (
	// SeverityError: the design breaks the Eviction API or blocks every
	// disruption.
	SeverityError Severity = "error"
	// SeverityWarning: the design is probably not what was meant, or
	// blocks disruptions in the state the cluster is in now.
	SeverityWarning Severity = "warning"
)

// FindingCode is a stable code for a kind of lint finding.
type FindingCode string

// The lint findings. Codes are part of the kubectl plugin's output schema;
// never rename one.
const (
	FindingMultiplePDBs         FindingCode = "MultiplePDBs"
	FindingNeverAllows          FindingCode = "NeverAllowsDisruption"
	FindingSelectsNoPods        FindingCode = "SelectsNoPods"
	FindingNilSelector          FindingCode = "NilSelector"
	FindingInvalidSelector      FindingCode = "InvalidSelector"
	FindingNoScalableController FindingCode = "NoScalableController"
	FindingUnhealthyPodsBlock   FindingCode = "UnhealthyPodsBlock"
	FindingPDBAndPUB            FindingCode = "PDBAndPUB"
	FindingMultiplePUBs         FindingCode = "MultiplePUBs"
	FindingStaleStatus          FindingCode = "StaleStatus"
	// FindingPDBAndPUBDisagree: a PDB and a PUB cover the same pods but
	// not alike (other thresholds, or pods the PUB leaves unprotected).
	FindingPDBAndPUBDisagree FindingCode = "PDBAndPUBDisagree"
	// FindingDeprecatedAnnotation: a PUB, or a pod under one, carries an
	// annotation OpenKruise has replaced (PUB v1beta1).
	FindingDeprecatedAnnotation FindingCode = "DeprecatedAnnotation"
)

const (
	maxPodsNamed                 = 5
	kindPod                      = "Pod"
	disruptionControllerScaleMsg = "the disruption controller reads the scale of the pods' controllers (ReplicaSet, Deployment, StatefulSet, ReplicationController) for maxUnavailable and percentages"
)

// ObjectRef names an object a finding involves.
type ObjectRef struct {
	Kind      string
	Namespace string
	Name      string
}

func (o ObjectRef) String() string { return o.Kind + " " + o.Namespace + "/" + o.Name }

// Finding is one problem of a budget design.
type Finding struct {
	Code     FindingCode
	Severity Severity
	// Objects are the budgets involved, then the pods (at most five, with
	// More counting the others).
	Objects []ObjectRef
	More    int
	Message string
	Fix     string
}

// LintInput is the state to lint: every pod, PDB and PUB of the namespaces
// looked at.
type LintInput struct {
	Pods []*v1.Pod
	PDBs []*policyv1.PodDisruptionBudget
	PUBs []*PUB
}

// Lint finds budget designs that break the Eviction API or block
// disruptions, using the Cache's coverage (the same as decisions use) for
// in's pods. Findings come sorted by severity, code and first object.
func (c *Cache) Lint(in LintInput) []Finding {
	var out []Finding
	pdbPods := map[budgetKey][]*v1.Pod{}
	pubPods := map[budgetKey][]*v1.Pod{}
	type group struct {
		code    FindingCode
		budgets []BudgetRef
		pods    []*v1.Pod
	}
	groups := map[string]*group{}
	addGroup := func(code FindingCode, refs []BudgetRef, pod *v1.Pod) {
		names := make([]string, 0, len(refs))
		for _, r := range refs {
			names = append(names, r.String())
		}
		sort.Strings(names)
		k := string(code) + "|" + strings.Join(names, ",")
		g := groups[k]
		if g == nil {
			g = &group{code: code, budgets: refs}
			groups[k] = g
		}
		g.pods = append(g.pods, pod)
	}

	pdbByKey := map[budgetKey]*policyv1.PodDisruptionBudget{}
	for _, p := range in.PDBs {
		pdbByKey[keyOf(pdbRef(p))] = p
	}
	pubByKey := map[budgetKey]*PUB{}
	for _, p := range in.PUBs {
		pubByKey[keyOf(pubRef(p))] = p
	}
	for _, pod := range in.Pods {
		if pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed || pod.DeletionTimestamp != nil {
			continue
		}
		pdbs, pubs := c.covering(pod)
		var pdbRefs, pubRefs []BudgetRef
		for _, p := range pdbs {
			pdbPods[keyOf(pdbRef(p))] = append(pdbPods[keyOf(pdbRef(p))], pod)
			pdbRefs = append(pdbRefs, pdbRef(p))
		}
		for _, p := range pubs {
			pubPods[keyOf(pubRef(p))] = append(pubPods[keyOf(pubRef(p))], pod)
			pubRefs = append(pubRefs, pubRef(p))
		}
		if len(pdbs) > 1 {
			addGroup(FindingMultiplePDBs, pdbRefs, pod)
		}
		if len(pubs) > 1 {
			addGroup(FindingMultiplePUBs, pubRefs, pod)
		}
		if len(pdbs) > 0 && len(pubs) > 0 {
			addGroup(FindingPDBAndPUB, append(pdbRefs, pubRefs...), pod)
		}
		for _, p := range pubs {
			if deprecatedPodAnnotations(pod, p) != "" {
				addGroup(FindingDeprecatedAnnotation, []BudgetRef{pubRef(p)}, pod)
			}
		}
	}
	for _, g := range groups {
		f := Finding{Code: g.code, Severity: SeverityWarning}
		names := refNames(g.budgets)
		switch g.code {
		case FindingMultiplePDBs:
			f.Severity = SeverityError
			every := "every one of them"
			if len(g.pods) == 1 {
				every = "it"
			}
			f.Message = fmt.Sprintf("%s covered by %d PodDisruptionBudgets (%s); the Eviction API answers 500 for %s",
				podsAre(len(g.pods)), len(g.budgets), names, every)
			f.Fix = "change the selectors so that each pod is covered by one PodDisruptionBudget, e.g. one per workload or one per role"
		case FindingMultiplePUBs:
			f.Message = fmt.Sprintf("%s covered by %d PodUnavailableBudgets (%s); OpenKruise leaves a pod under several PUBs undefined",
				podsAre(len(g.pods)), len(g.budgets), names)
			f.Fix = "change the selectors or targetRefs so that each pod is covered by one PodUnavailableBudget"
		case FindingPDBAndPUB:
			f.Message = fmt.Sprintf("%s covered by a PodDisruptionBudget and a PodUnavailableBudget (%s); every disruption must satisfy both",
				podsAre(len(g.pods)), names)
			f.Fix = "protect the pods with one kind of budget, unless both are meant"
			if why := disagreement(g.budgets, g.pods, pdbByKey, pubByKey); why != "" {
				f.Code = FindingPDBAndPUBDisagree
				f.Message = fmt.Sprintf("%s covered by a PodDisruptionBudget and a PodUnavailableBudget (%s) that disagree: %s; the stricter one decides each disruption, and the Eviction API, OpenKruise and cluster-autoscaler each know only some of them",
					podsAre(len(g.pods)), names, why)
				f.Fix = "give both budgets the same threshold and the same pods, or protect the pods with one kind of budget"
			}
		case FindingDeprecatedAnnotation:
			carry := "carry"
			if len(g.pods) == 1 {
				carry = "carries"
			}
			f.Message = fmt.Sprintf("%d %s under %s %s annotations OpenKruise has replaced: %s",
				len(g.pods), plural(int32(len(g.pods)), "pod"), names, carry, deprecatedPodAnnotations(g.pods[0], pubByKey[keyOf(g.budgets[0])]))
			f.Fix = "select the pods to leave unprotected with the PUB's spec.ignoredPodSelector (policy.kruise.io/v1beta1); let OpenKruise's webhook write pub.kruise.io/related-pub"
		}
		f.Objects, f.More = objects(g.budgets, g.pods)
		out = append(out, f)
	}

	for _, pdb := range in.PDBs {
		out = append(out, lintPDB(pdb, pdbPods[keyOf(pdbRef(pdb))])...)
	}
	for _, pub := range in.PUBs {
		out = append(out, c.lintPUB(pub, pubPods[keyOf(pubRef(pub))])...)
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Severity != b.Severity {
			return a.Severity == SeverityError
		}
		if a.Code != b.Code {
			return a.Code < b.Code
		}
		return a.Objects[0].String() < b.Objects[0].String()
	})
	return out
}

func lintPDB(pdb *policyv1.PodDisruptionBudget, pods []*v1.Pod) []Finding {
	ref := pdbRef(pdb)
	var out []Finding
	one := func(code FindingCode, sev Severity, pods []*v1.Pod, fix, format string, args ...any) {
		f := Finding{Code: code, Severity: sev, Message: ref.String() + ": " + fmt.Sprintf(format, args...), Fix: fix}
		f.Objects, f.More = objects([]BudgetRef{ref}, pods)
		out = append(out, f)
	}
	if pdb.Status.ObservedGeneration < pdb.Generation {
		one(FindingStaleStatus, SeverityWarning, nil,
			"check that kube-controller-manager's disruption controller runs; until it catches up every eviction under this PDB is refused",
			"status is stale (observedGeneration %d < generation %d)", pdb.Status.ObservedGeneration, pdb.Generation)
	}
	sel, err := pdbSelector(pdb)
	switch {
	case err != nil:
		one(FindingInvalidSelector, SeverityError, nil, "fix spec.selector; the Eviction API treats an invalid selector as matching no pod",
			"%v; it covers no pod", err)
		return out
	case sel == nil:
		one(FindingNilSelector, SeverityWarning, nil, "set spec.selector; {} selects every pod of the namespace",
			"spec.selector is not set, so it covers no pod")
		return out
	case len(pods) == 0 && sel.Empty():
		// {}: labels.Selector prints it as "", which reads as no selector.
		one(FindingSelectsNoPods, SeverityWarning, nil, "nothing, if the namespace's pods are still to come; else delete the PDB",
			"its selector {} selects every pod of the namespace, and the namespace has none")
		return out
	case len(pods) == 0:
		one(FindingSelectsNoPods, SeverityWarning, nil, "check the selector against the pods' labels, or delete the PDB",
			"selector %q matches no pod", sel.String())
		return out
	}
	n := len(pods)
	if reason := neverAllows(pdb.Spec, n); reason != "" {
		one(FindingNeverAllows, SeverityError, nil, neverAllowsFix(pdb.Spec, n),
			"%s, over %d %s: it never allows a disruption", reason, n, plural(int32(n), "pod"))
	}
	if usesScale(pdb.Spec) {
		var bare, other []*v1.Pod
		for _, p := range pods {
			switch ctl := metav1.GetControllerOf(p); {
			case ctl == nil:
				bare = append(bare, p)
			case !scalableKind(ctl):
				other = append(other, p)
			}
		}
		if len(bare) > 0 {
			one(FindingNoScalableController, SeverityError, bare,
				"use an integer minAvailable for pods without a controller",
				"maxUnavailable or a percentage over %d %s without a controller; %s, so it allows no disruption",
				len(bare), plural(int32(len(bare)), "pod"), disruptionControllerScaleMsg)
		}
		if len(other) > 0 {
			one(FindingNoScalableController, SeverityWarning, other,
				"make sure the controller serves the scale subresource, or use an integer minAvailable",
				"maxUnavailable or a percentage over %d %s whose controller is not a ReplicaSet, Deployment, StatefulSet or ReplicationController; %s, or else a scale subresource",
				len(other), plural(int32(len(other)), "pod"), disruptionControllerScaleMsg)
		}
	}
	if p := pdb.Spec.UnhealthyPodEvictionPolicy; p == nil || *p != policyv1.AlwaysAllow {
		var unready []*v1.Pod
		for _, pod := range pods {
			if pod.Status.Phase == v1.PodRunning && !podReady(pod) {
				unready = append(unready, pod)
			}
		}
		if len(unready) > 0 {
			one(FindingUnhealthyPodsBlock, SeverityWarning, unready,
				"set unhealthyPodEvictionPolicy: AlwaysAllow",
				"%d running %s not Ready; without unhealthyPodEvictionPolicy: AlwaysAllow such a pod cannot be evicted while the application is disrupted (now %d healthy, %d desired), so drains hang",
				len(unready), plural(int32(len(unready)), "pod"), pdb.Status.CurrentHealthy, pdb.Status.DesiredHealthy)
		}
	}
	return out
}

func (c *Cache) lintPUB(pub *PUB, pods []*v1.Pod) []Finding {
	ref := pubRef(pub)
	var out []Finding
	one := func(code FindingCode, sev Severity, fix, format string, args ...any) {
		f := Finding{Code: code, Severity: sev, Message: ref.String() + ": " + fmt.Sprintf(format, args...), Fix: fix,
			Objects: []ObjectRef{refObject(ref)}}
		out = append(out, f)
	}
	if pub.Status.ObservedGeneration < pub.Generation {
		one(FindingStaleStatus, SeverityWarning, "check that OpenKruise's PUB controller runs",
			"status is stale (observedGeneration %d < generation %d)", pub.Status.ObservedGeneration, pub.Generation)
	}
	switch {
	case pub.Spec.TargetReference != nil:
		if _, err := targetOf(pub); err != nil {
			one(FindingInvalidSelector, SeverityError, "fix spec.targetRef", "%v; it covers only pods annotated %s", err, AnnotationRelatedPUB)
			return out
		}
	case pub.Spec.Selector == nil:
		one(FindingNilSelector, SeverityWarning, "set spec.selector or spec.targetRef",
			"neither spec.selector nor spec.targetRef is set; it covers only pods annotated %s", AnnotationRelatedPUB)
		return out
	default:
		if _, err := metav1.LabelSelectorAsSelector(pub.Spec.Selector); err != nil {
			one(FindingInvalidSelector, SeverityError, "fix spec.selector", "spec.selector: %v; it covers only pods annotated %s", err, AnnotationRelatedPUB)
			return out
		}
	}
	if len(pods) == 0 && c.PUBEnabled() {
		one(FindingSelectsNoPods, SeverityWarning, "check the selector or targetRef against the pods, or delete the PUB", "covers no pod")
	}
	var old []string
	for _, a := range []struct{ annotation, field string }{
		{AnnotationPUBProtectOperations, "spec.protectOperations"},
		{AnnotationPUBProtectTotalReplicas, "spec.protectTotalReplicas"},
	} {
		if _, ok := pub.Annotations[a.annotation]; ok {
			old = append(old, fmt.Sprintf("annotation %s (now %s)", a.annotation, a.field))
		}
	}
	if len(old) > 0 {
		one(FindingDeprecatedAnnotation, SeverityWarning,
			"write the PUB at policy.kruise.io/v1beta1 with the spec fields and drop the annotations; where both are set, the field decides",
			"written for an older OpenKruise: %s", strings.Join(old, ", "))
	}
	return out
}

// deprecatedPodAnnotations names the annotations of pod, covered by pub,
// that OpenKruise has replaced, or "".
func deprecatedPodAnnotations(pod *v1.Pod, pub *PUB) string {
	var old []string
	if _, ok := pod.Annotations[AnnotationPUBNoProtect]; ok {
		old = append(old, AnnotationPUBNoProtect+" (now the PUB's spec.ignoredPodSelector)")
	}
	if pub != nil && pod.Annotations[AnnotationPodRelatedPUB] == "" && pod.Annotations[AnnotationRelatedPUB] == pub.Name {
		old = append(old, AnnotationRelatedPUB+" without "+AnnotationPodRelatedPUB)
	}
	return strings.Join(old, ", ")
}

// disagreement says how the PDB and the PUB among refs treat pods
// differently, or "" when they agree: other thresholds, or pods the PUB
// exempts (ignoredPodSelector, no-protect) that the PDB protects.
func disagreement(refs []BudgetRef, pods []*v1.Pod, pdbs map[budgetKey]*policyv1.PodDisruptionBudget, pubs map[budgetKey]*PUB) string {
	var pdb *policyv1.PodDisruptionBudget
	var pub *PUB
	for _, r := range refs {
		switch r.Kind {
		case KindPDB:
			pdb = pdbs[keyOf(r)]
		case KindPUB:
			pub = pubs[keyOf(r)]
		}
	}
	if pdb == nil || pub == nil {
		return ""
	}
	var why []string
	if a, b := threshold(pdb.Spec.MinAvailable, pdb.Spec.MaxUnavailable), threshold(pub.Spec.MinAvailable, pub.Spec.MaxUnavailable); a != b {
		why = append(why, fmt.Sprintf("%s has %s, %s has %s", pdbRef(pdb), a, pubRef(pub), b))
	}
	exempt := 0
	for _, p := range pods {
		if ignored, err := pubIgnores(pub, p); pubNoProtect(p) || (err == nil && ignored) {
			exempt++
		}
	}
	if exempt > 0 {
		why = append(why, fmt.Sprintf("%s leaves %d of them unprotected (ignoredPodSelector or %s)", pubRef(pub), exempt, AnnotationPUBNoProtect))
	}
	return strings.Join(why, "; ")
}

// threshold is a budget's spec as a person reads it; maxUnavailable takes
// priority, as for both kinds.
func threshold(minAvailable, maxUnavailable *intstr.IntOrString) string {
	switch {
	case maxUnavailable != nil:
		return "maxUnavailable " + maxUnavailable.String()
	case minAvailable != nil:
		return "minAvailable " + minAvailable.String()
	}
	return "no threshold"
}

// neverAllows says why a PDB spec over n pods can never allow a
// disruption, or "". Percentages round up, as the disruption controller's.
func neverAllows(spec policyv1.PodDisruptionBudgetSpec, n int) string {
	if v := spec.MaxUnavailable; v != nil {
		if m, err := intstr.GetScaledValueFromIntOrPercent(v, n, true); err == nil && m <= 0 {
			return fmt.Sprintf("maxUnavailable is %s", v.String())
		}
		return ""
	}
	if v := spec.MinAvailable; v != nil {
		if m, err := intstr.GetScaledValueFromIntOrPercent(v, n, true); err == nil && m >= n {
			return fmt.Sprintf("minAvailable %s is at least the number of pods", v.String())
		}
	}
	return ""
}

// neverAllowsFix is the fix of a NeverAllowsDisruption finding, about the
// field that spec sets: maxUnavailable takes priority over minAvailable, as
// in neverAllows.
func neverAllowsFix(spec policyv1.PodDisruptionBudgetSpec, n int) string {
	if spec.MaxUnavailable != nil {
		return "set maxUnavailable to at least 1 (or, as a percentage, above 0%)"
	}
	if spec.MinAvailable != nil && spec.MinAvailable.Type == intstr.String {
		return fmt.Sprintf("lower minAvailable below the number of pods (%d; a percentage rounds up to whole pods)", n)
	}
	return fmt.Sprintf("lower minAvailable below the number of pods (%d)", n)
}

// podsAre is "1 pod is" or "n pods are".
func podsAre(n int) string {
	if n == 1 {
		return "1 pod is"
	}
	return fmt.Sprintf("%d pods are", n)
}

// usesScale reports whether the disruption controller needs the pods'
// controllers' scale for spec: maxUnavailable, or a percentage minAvailable.
func usesScale(spec policyv1.PodDisruptionBudgetSpec) bool {
	return spec.MaxUnavailable != nil || (spec.MinAvailable != nil && spec.MinAvailable.Type == intstr.String)
}

// scalableKind reports whether the disruption controller finds the scale of
// a controller of this kind without a scale subresource.
func scalableKind(ref *metav1.OwnerReference) bool {
	switch ref.APIVersion + "/" + ref.Kind {
	case "apps/v1/ReplicaSet", "apps/v1/Deployment", "apps/v1/StatefulSet", "v1/ReplicationController":
		return true
	}
	return false
}

func refObject(r BudgetRef) ObjectRef {
	return ObjectRef{Kind: string(r.Kind), Namespace: r.Namespace, Name: r.Name}
}

func refNames(refs []BudgetRef) string {
	names := make([]string, 0, len(refs))
	for _, r := range refs {
		names = append(names, r.String())
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// objects lists budgets (sorted), then up to maxPodsNamed pods (sorted),
// and how many pods were left out.
func objects(budgets []BudgetRef, pods []*v1.Pod) ([]ObjectRef, int) {
	var out []ObjectRef
	for _, b := range budgets {
		out = append(out, refObject(b))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	names := make([]string, 0, len(pods))
	for _, p := range pods {
		names = append(names, p.Namespace+"/"+p.Name)
	}
	sort.Strings(names)
	more := 0
	if len(names) > maxPodsNamed {
		more = len(names) - maxPodsNamed
		names = names[:maxPodsNamed]
	}
	for _, n := range names {
		ns, name, _ := strings.Cut(n, "/")
		out = append(out, ObjectRef{Kind: kindPod, Namespace: ns, Name: name})
	}
	return out, more
}
