package budget

// The Cache's filing of budgets: the informers' event handlers that file
// PDBs and PUBs by namespace and selector (with each PDB's live count), and
// the lookup of the budgets that cover a pod.

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

func tombstone[T any](obj any) (T, bool) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	t, ok := obj.(T)
	return t, ok
}

func (c *Cache) onPod(obj any, deleted bool) {
	pod, ok := tombstone[*v1.Pod](obj)
	if !ok {
		return
	}
	// The live count first: the ledger weighs the holds its event may end
	// against it (holdend.go).
	track := c.ledger.n.Load() > 0
	var buf [4]liveChange
	changes := c.podChanged(pod, deleted, track, buf[:0])
	if !track && c.ledger.n.Load() == 0 {
		return
	}
	c.liveChanged(podKey{pod.Namespace, pod.Name}, pod.UID, deleted || pod.DeletionTimestamp != nil, changes)
}

func (c *Cache) onPDB(obj any, deleted bool) {
	pdb, ok := tombstone[*policyv1.PodDisruptionBudget](obj)
	if !ok {
		return
	}
	k := budgetKey{KindPDB, pdb.Namespace, pdb.Name}
	if deleted {
		c.mu.Lock()
		c.pdbs.remove(pdb.Namespace, pdb.Name)
		delete(c.versions, k)
		c.mu.Unlock()
		c.ledger.budgetDeleted(k)
		c.live.coverageChanged(pdb.Namespace)
		c.recountChanged(pdb.Namespace)
		c.live.forget(k)
		return
	}
	sel, err := pdbSelector(pdb)
	if err != nil {
		// The Eviction API treats an invalid selector as matching nothing;
		// so do we, loudly.
		c.logger.Info("Warning: PodDisruptionBudget has an invalid selector; it covers no pod, as in the Eviction API",
			"podDisruptionBudget", klog.KObj(pdb), "err", err)
	}
	live := c.live.counter(k) // before c.mu: the live index's lock comes first
	c.mu.Lock()
	c.versions[k] = pdb.ResourceVersion
	old, had := c.pdbs.get(pdb.Namespace, pdb.Name)
	covers := true // whether the PDB covers other pods than before
	switch {
	case sel == nil:
		c.pdbs.remove(pdb.Namespace, pdb.Name)
		covers = had
	case had && old.spends[0].UID == pdb.UID && equality.Semantic.DeepEqual(old.pdb.Load().Spec.Selector, pdb.Spec.Selector):
		// A new status, usually: the entry stays where it is filed.
		old.pdb.Store(pdb)
		covers = false
	default:
		c.pdbs.set(pdb.Namespace, pdb.Name, sel, newPDBEntry(pdb, live))
	}
	c.mu.Unlock()
	c.budgetStatusChanged(k, pdb.Status.CurrentHealthy, pdb.Status.DisruptedPods)
	if covers {
		c.live.coverageChanged(pdb.Namespace)
		c.recountChanged(pdb.Namespace)
	}
}

// budgetStatusChanged hands a budget's new status to the ledger
// (ledger.budgetStatusChanged), lets the live count end the holds it may
// (settleLive), and calls the released hooks when holds ended that free the
// budget.
func (c *Cache) budgetStatusChanged(k budgetKey, healthy int32, recorded ...map[string]metav1.Time) {
	released := c.ledger.budgetStatusChanged(k, healthy, recorded...)
	if c.settleLive(k) {
		released = true
	}
	if released {
		c.ledger.notifyReleased()
	}
}

// pdbSelector converts a PDB's selector; nil (and an error) when it matches
// nothing: a nil selector or an invalid one.
func pdbSelector(pdb *policyv1.PodDisruptionBudget) (labels.Selector, error) {
	if pdb.Spec.Selector == nil {
		return nil, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("spec.selector: %w", err)
	}
	return sel, nil
}

func (c *Cache) onPUB(obj any, deleted bool) {
	pub, ok, convErr := pubOf(obj)
	if !ok {
		return
	}
	k := budgetKey{KindPUB, pub.Namespace, pub.Name}
	c.mu.Lock()
	old := c.pubsByName[podKey{pub.Namespace, pub.Name}]
	if convErr != nil && !deleted && (old == nil || !maps.Equal(old.Annotations, pub.Annotations)) {
		c.logger.Info("Warning: PodUnavailableBudget has an annotation that does not parse; it is read as OpenKruise's webhook reads it",
			"podUnavailableBudget", klog.KObj(pub), "err", convErr)
	}
	c.removePUBLocked(pub.Namespace, pub.Name)
	delete(c.versions, k)
	if !deleted {
		c.addPUBLocked(pub)
		c.versions[k] = pub.ResourceVersion
	}
	c.mu.Unlock()
	if deleted {
		c.ledger.budgetDeleted(k)
		c.live.coverageChanged(pub.Namespace)
		c.recountChanged(pub.Namespace)
		c.live.forget(k)
		return
	}
	c.budgetStatusChanged(k, pub.Status.CurrentAvailable, pub.Status.DisruptedPods, pub.Status.UnavailablePods)
	if old == nil || !pubCoverageSame(old, pub) {
		c.live.coverageChanged(pub.Namespace)
		c.recountChanged(pub.Namespace)
	}
}

// pubCoverageSame reports whether two versions of a PUB cover the same pods:
// the same selector and targetRef.
func pubCoverageSame(a, b *PUB) bool {
	return equality.Semantic.DeepEqual(a.Spec.Selector, b.Spec.Selector) &&
		equality.Semantic.DeepEqual(a.Spec.TargetReference, b.Spec.TargetReference)
}

func (c *Cache) addPUBLocked(pub *PUB) {
	c.pubsByName[podKey{pub.Namespace, pub.Name}] = pub
	if pub.Spec.TargetReference != nil {
		// Kruise: targetRef takes priority over selector.
		t, err := targetOf(pub)
		if err != nil {
			c.logger.Info("Warning: PodUnavailableBudget has an invalid targetRef; it covers only pods annotated "+AnnotationRelatedPUB,
				"podUnavailableBudget", klog.KObj(pub), "err", err)
			return
		}
		m := c.pubsByTarget[t]
		if m == nil {
			m = map[string]*PUB{}
			c.pubsByTarget[t] = m
		}
		m[pub.Name] = pub
		return
	}
	if pub.Spec.Selector == nil {
		return
	}
	sel, err := metav1.LabelSelectorAsSelector(pub.Spec.Selector)
	if err != nil {
		c.logger.Info("Warning: PodUnavailableBudget has an invalid selector; it covers only pods annotated "+AnnotationRelatedPUB,
			"podUnavailableBudget", klog.KObj(pub), "err", err)
		return
	}
	c.pubsBySelector.set(pub.Namespace, pub.Name, sel, pub)
}

func (c *Cache) removePUBLocked(namespace, name string) {
	old := c.pubsByName[podKey{namespace, name}]
	if old == nil {
		return
	}
	delete(c.pubsByName, podKey{namespace, name})
	c.pubsBySelector.remove(namespace, name)
	if old.Spec.TargetReference != nil {
		if t, err := targetOf(old); err == nil {
			delete(c.pubsByTarget[t], name)
			if len(c.pubsByTarget[t]) == 0 {
				delete(c.pubsByTarget, t)
			}
		}
	}
}

// pdbEntry is a PDB as the Cache files it, with what a decision needs
// computed once per PDB event rather than once per decision.
//
// An entry lasts as long as its PDB keeps its UID and selector, so that a
// pod's memo (livePod) may point to it; pdb is the latest version, replaced
// on every update (its status).
type pdbEntry struct {
	pdb atomic.Pointer[policyv1.PodDisruptionBudget]
	key budgetKey
	// live is the PDB's live count (live.go).
	live *liveCount
	// spends is the PDB's ref alone, with capacity 1: the Spends of every
	// allowed decision that spends this PDB and no other budget. Decisions
	// share it; nothing writes to it.
	spends []BudgetRef
}

func newPDBEntry(pdb *policyv1.PodDisruptionBudget, live *liveCount) *pdbEntry {
	ref := pdbRef(pdb)
	e := &pdbEntry{key: keyOf(ref), live: live, spends: []BudgetRef{ref}[:1:1]}
	e.pdb.Store(pdb)
	return e
}

// covering collects the budgets that cover pod. Budget objects come from
// informers and are never modified.
func (c *Cache) covering(pod *v1.Pod) ([]*policyv1.PodDisruptionBudget, []*PUB) {
	entries, pubs, _ := c.coveringInto(pod, nil, nil)
	// All by name, for reports (coveringInto puts the PUBs that count the
	// pod first).
	slices.SortFunc(pubs, func(a, b *PUB) int { return strings.Compare(a.Name, b.Name) })
	pdbs := make([]*policyv1.PodDisruptionBudget, 0, len(entries))
	for _, e := range entries {
		pdbs = append(pdbs, e.pdb.Load())
	}
	return pdbs, pubs
}

// coveringInto appends the budgets that cover pod to pdbs and pubs; it
// allocates nothing when they have room. The PUBs come as pubsForLocked
// gives them, the ones that count pod first (their number is returned),
// each part sorted by name, and so are the PDBs.
func (c *Cache) coveringInto(pod *v1.Pod, pdbs []*pdbEntry, pubs []*PUB) ([]*pdbEntry, []*PUB, int) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	start := len(pubs)
	pdbs, _ = c.pdbs.matching(pod.Namespace, pod.Labels, pdbs)
	pubs, counted := c.pubsForLocked(pod, pubs)
	// By name, so that messages naming several budgets do not depend on
	// map order; usually there is one of each at most.
	if len(pdbs) > 1 {
		slices.SortFunc(pdbs, func(a, b *pdbEntry) int { return strings.Compare(a.key.name, b.key.name) })
	}
	if counted > 1 {
		slices.SortFunc(pubs[start:start+counted], func(a, b *PUB) int { return strings.Compare(a.Name, b.Name) })
	}
	return pdbs, pubs, counted
}
