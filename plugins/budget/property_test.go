package budget

import (
	"flag"
	"fmt"
	"math/rand"
	"sort"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/budgetguard/budgetguard/internal/testobj"
)

var (
	propertySeed  = flag.Int64("budget.seed", 20261121, "seed of TestPropertyNeverOverspend")
	propertySteps = flag.Int("budget.steps", 12000, "steps per seed of TestPropertyNeverOverspend")
)

// The property test drives the Cache with a model of a cluster: an API
// server with an Eviction API written from eviction.go's rules (not from this
// package), a disruption controller that recomputes budgets' status some
// time after each change, and informers that deliver every object's
// versions in order but interleave objects at random.
//
// Model assumptions, which are the ledger's stated ones: the controller
// recomputes within maxLag of a change and its writes reach the Cache within
// maxLag; 2*maxLag < DefaultSettleDelay.
const (
	maxStep = 150 * time.Millisecond
	maxLag  = 300 * time.Millisecond
)

type mPod struct {
	name        string
	uid         types.UID
	budget      int // -1: no budget
	ready       bool
	terminating bool
	gone        bool
}

// mVersion is one written version of a PDB and what it accounts for.
type mVersion struct {
	obj *policyv1.PodDisruptionBudget
	// upTo: disruptions with seq <= upTo are counted (recomputed after them);
	// plus the evictions in extra, recorded in DisruptedPods by the API server.
	upTo  int
	extra map[int]bool
}

func (v *mVersion) counts(seq int) bool { return seq <= v.upTo || v.extra[seq] }

type mBudget struct {
	name         string
	minAvailable int32
	policy       *policyv1.UnhealthyPodEvictionPolicyType
	generation   int64
	etcd         *mVersion // latest written
	held         *mVersion // latest delivered to the Cache
	disrupted    map[string]metav1.Time
	recomputeAt  time.Time // zero: none pending
	// started: disruptions budgetguard started that spent this budget.
	started []int
}

type delivery struct {
	at  time.Time
	seq int
	fn  func()
}

type model struct {
	t       *testing.T
	rng     *rand.Rand
	h       *harness
	pods    map[string]*mPod
	budgets []*mBudget
	queue   []delivery
	lastAt  map[string]time.Time // per object, to keep versions in order
	seq     int                  // delivery order tie-break
	dseq    int                  // disruption sequence
	view    map[string]*v1.Pod   // pods as delivered to the Cache
	stats   map[string]int
	trace   []string
}

func (m *model) logf(format string, args ...any) {
	m.trace = append(m.trace, fmt.Sprintf("%8s ", m.now().Sub(epoch).Truncate(time.Millisecond))+fmt.Sprintf(format, args...))
	if len(m.trace) > 80 {
		m.trace = m.trace[1:]
	}
}

func (m *model) now() time.Time { return m.h.clock.Now() }

func (m *model) deliver(object string, fn func()) {
	at := m.now().Add(time.Duration(m.rng.Int63n(int64(maxLag))))
	if last := m.lastAt[object]; at.Before(last) {
		at = last
	}
	m.lastAt[object] = at
	m.seq++
	m.queue = append(m.queue, delivery{at: at, seq: m.seq, fn: fn})
}

func (m *model) podObject(p *mPod) *v1.Pod {
	pod := testobj.RunningPod(ns, p.name).UID(string(p.uid)).Ready(p.ready)
	if p.budget >= 0 {
		pod.Label("app", m.budgets[p.budget].name)
	}
	if p.terminating {
		pod.Terminating(epoch)
	}
	return pod.Obj()
}

func (m *model) podChanged(p *mPod) {
	obj, gone := m.podObject(p), p.gone
	m.deliver("pod/"+p.name, func() {
		if gone {
			if cur := m.view[obj.Name]; cur != nil && cur.UID == obj.UID {
				delete(m.view, obj.Name)
			}
		} else {
			m.view[obj.Name] = obj
		}
		m.logf("deliver pod %s uid=%s ready=%v terminating=%v gone=%v", obj.Name, obj.UID, podReady(obj), obj.DeletionTimestamp != nil, gone)
		m.h.podEvent(obj, gone)
	})
	if p.budget >= 0 {
		m.trigger(m.budgets[p.budget])
	}
}

func (m *model) trigger(b *mBudget) {
	at := m.now().Add(time.Duration(m.rng.Int63n(int64(maxLag / 2))))
	if b.recomputeAt.IsZero() || at.Before(b.recomputeAt) {
		b.recomputeAt = at
	}
}

// write stores a new version of b and schedules its delivery.
func (m *model) write(b *mBudget, v *mVersion) {
	b.etcd = v
	m.deliver("pdb/"+b.name, func() {
		b.held = v
		m.logf("deliver pdb %s allowed=%d healthy=%d disrupted=%v upTo=%d extra=%v", b.name, v.obj.Status.DisruptionsAllowed, v.obj.Status.CurrentHealthy, v.obj.Status.DisruptedPods, v.upTo, v.extra)
		m.h.pdb(v.obj)
	})
}

func (m *model) pdbObject(b *mBudget, st policyv1.PodDisruptionBudgetStatus) *policyv1.PodDisruptionBudget {
	p := testobj.MakePDB().Namespace(ns).Name(b.name).UID("uid-pdb-"+b.name).Generation(b.generation).
		MatchLabels("app", b.name).MinAvailable(b.minAvailable).UnhealthyPodEvictionPolicy(ptr.Deref(b.policy, "")).Obj()
	p.Status = st
	return p
}

// recompute is the disruption controller's sync of b.
func (m *model) recompute(b *mBudget) {
	now := m.now()
	disrupted := map[string]metav1.Time{}
	var healthy, expected int32
	for _, p := range m.pods {
		if p.budget < 0 || m.budgets[p.budget] != b || p.gone {
			continue
		}
		expected++
		if p.terminating {
			continue
		}
		if t, ok := b.disrupted[p.name]; ok && t.Add(2*time.Minute).After(now) {
			disrupted[p.name] = t
			continue
		}
		if p.ready {
			healthy++
		}
	}
	b.disrupted = disrupted
	written := make(map[string]metav1.Time, len(disrupted))
	for k, v := range disrupted {
		written[k] = v
	}
	st := policyv1.PodDisruptionBudgetStatus{
		ObservedGeneration: b.generation,
		CurrentHealthy:     healthy,
		DesiredHealthy:     b.minAvailable,
		ExpectedPods:       expected,
		DisruptedPods:      written, // versions are immutable once written
		DisruptionsAllowed: max(0, healthy-b.minAvailable),
	}
	m.logf("write pdb %s allowed=%d healthy=%d upTo=%d", b.name, st.DisruptionsAllowed, healthy, m.dseq)
	m.write(b, &mVersion{obj: m.pdbObject(b, st), upTo: m.dseq, extra: map[int]bool{}})
}

// evict is the Eviction API, modelled on eviction.go independently of this
// package. It returns whether the pod was removed.
func (m *model) evict(p *mPod, seq int) bool {
	if p.gone || p.terminating {
		return true
	}
	if p.budget < 0 {
		m.remove(p)
		return true
	}
	b := m.budgets[p.budget]
	st := b.etcd.obj.Status
	if !p.ready {
		if b.policy != nil && *b.policy == policyv1.AlwaysAllow {
			m.remove(p)
			return true
		}
		if st.CurrentHealthy >= st.DesiredHealthy && st.DesiredHealthy > 0 {
			m.remove(p)
			return true
		}
	}
	if st.ObservedGeneration < b.generation || st.DisruptionsAllowed <= 0 {
		return false // 429
	}
	st = *st.DeepCopy()
	st.DisruptionsAllowed--
	if st.DisruptedPods == nil {
		st.DisruptedPods = map[string]metav1.Time{}
	}
	st.DisruptedPods[p.name] = metav1.NewTime(m.now().Truncate(time.Second))
	b.disrupted[p.name] = st.DisruptedPods[p.name]
	extra := map[int]bool{seq: true}
	for k := range b.etcd.extra {
		extra[k] = true
	}
	m.write(b, &mVersion{obj: m.pdbObject(b, st), upTo: b.etcd.upTo, extra: extra})
	m.remove(p)
	return true
}

func (m *model) remove(p *mPod) {
	p.terminating = true
	m.podChanged(p)
}

func (m *model) randomPod(filter func(*mPod) bool) *mPod {
	names := make([]string, 0, len(m.pods))
	for n, p := range m.pods {
		if filter(p) {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return nil
	}
	sort.Strings(names)
	return m.pods[names[m.rng.Intn(len(names))]]
}

// disrupt is one budgetguard decision and its actuation. It asserts the
// property: at the moment budgetguard starts a disruption that spends a
// budget, the disruptions it started against that budget which the status
// it holds does not count, this one included, do not exceed what that status
// allows.
func (m *model) disrupt() {
	names := make([]string, 0, len(m.view))
	for n := range m.view {
		names = append(names, n)
	}
	if len(names) == 0 {
		return
	}
	sort.Strings(names)
	pod := m.view[names[m.rng.Intn(len(names))]]
	op := OperationEvict
	if m.rng.Intn(2) == 0 {
		op = OperationDelete
	}
	d, r := m.h.c.Reserve(pod, op)
	if !d.Allowed {
		m.stats["denied"]++
		return
	}
	p := m.pods[pod.Name]
	if p == nil || p.uid != pod.UID || m.rng.Intn(10) == 0 {
		m.stats["never-actuated"]++
		return // the caller changed its mind; the reservation must expire
	}
	m.dseq++
	seq := m.dseq
	if op == OperationEvict {
		if !m.evict(p, seq) {
			m.stats["evict-429"]++
			r.Cancel()
			return
		}
	} else if !p.terminating && !p.gone {
		m.remove(p)
	}
	m.stats["disrupted"]++
	m.logf("disrupt #%d %s %s uid=%s spends=%v", seq, op, pod.Name, pod.UID, d.Spends)
	for _, ref := range d.Spends {
		for _, b := range m.budgets {
			if b.name != ref.Name {
				continue
			}
			b.started = append(b.started, seq)
			m.check(b, pod.Name, op)
		}
	}
}

func (m *model) check(b *mBudget, pod string, op Operation) {
	held := b.held
	var uncounted int32
	for _, s := range b.started {
		if !held.counts(s) {
			uncounted++
		}
	}
	if allowed := max(0, held.obj.Status.DisruptionsAllowed); uncounted > allowed {
		for _, l := range m.trace {
			m.t.Log(l)
		}
		m.t.Fatalf("%s of %s: budgetguard has started %d disruptions against pdb %s that its status does not count, but that status allows %d (status %+v)",
			op, pod, uncounted, b.name, allowed, held.obj.Status)
	}
}

func (m *model) step() {
	m.h.clock.Step(time.Duration(m.rng.Int63n(int64(maxStep))))
	now := m.now()
	// Deliver what is due, in order.
	sort.SliceStable(m.queue, func(i, j int) bool {
		if !m.queue[i].at.Equal(m.queue[j].at) {
			return m.queue[i].at.Before(m.queue[j].at)
		}
		return m.queue[i].seq < m.queue[j].seq
	})
	n := 0
	for n < len(m.queue) && !m.queue[n].at.After(now) {
		m.queue[n].fn()
		n++
	}
	m.queue = m.queue[n:]
	for _, b := range m.budgets {
		if !b.recomputeAt.IsZero() && !b.recomputeAt.After(now) {
			b.recomputeAt = time.Time{}
			m.recompute(b)
		}
	}

	switch x := m.rng.Intn(100); {
	case x < 45:
		m.disrupt()
	case x < 60: // involuntary readiness change
		if p := m.randomPod(func(p *mPod) bool { return !p.gone && !p.terminating }); p != nil {
			p.ready = !p.ready
			m.podChanged(p)
		}
	case x < 72: // the kubelet finishes a terminating pod
		if p := m.randomPod(func(p *mPod) bool { return p.terminating && !p.gone }); p != nil {
			p.gone = true
			m.podChanged(p)
			m.stats["finished"]++
		}
	case x < 82: // a replacement pod, sometimes reusing a gone pod's name
		name := fmt.Sprintf("pod-%d", m.rng.Intn(60))
		if old := m.pods[name]; old != nil && !old.gone {
			return
		}
		p := &mPod{name: name, uid: types.UID(fmt.Sprintf("%s-%d", name, m.seq)), budget: m.rng.Intn(len(m.budgets)+1) - 1, ready: m.rng.Intn(2) == 0}
		m.pods[name] = p
		m.podChanged(p)
	case x < 85: // a spec change: the status goes stale until recomputed
		b := m.budgets[m.rng.Intn(len(m.budgets))]
		b.generation++
		b.minAvailable = int32(1 + m.rng.Intn(3))
		m.write(b, &mVersion{obj: m.pdbObject(b, b.etcd.obj.Status), upTo: b.etcd.upTo, extra: b.etcd.extra})
		m.trigger(b)
	}
}

func TestPropertyNeverOverspend(t *testing.T) {
	for _, seed := range []int64{*propertySeed, *propertySeed + 1, *propertySeed + 2} {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			m := &model{t: t, rng: rand.New(rand.NewSource(seed)), h: newHarness(t),
				pods: map[string]*mPod{}, lastAt: map[string]time.Time{}, view: map[string]*v1.Pod{}, stats: map[string]int{}}
			for i := 0; i < 4; i++ {
				b := &mBudget{name: fmt.Sprint("b", i), minAvailable: int32(1 + i%3), generation: 1, disrupted: map[string]metav1.Time{}}
				if i%2 == 1 {
					b.policy = ptr.To(policyv1.AlwaysAllow)
				}
				m.budgets = append(m.budgets, b)
			}
			for i := 0; i < 40; i++ {
				p := &mPod{name: fmt.Sprintf("pod-%d", i), uid: types.UID(fmt.Sprint("uid-", i)), budget: i%5 - 1, ready: true}
				m.pods[p.name] = p
				m.view[p.name] = m.podObject(p)
				m.h.podEvent(m.view[p.name], false)
			}
			// Informers sync before the first decision.
			for _, b := range m.budgets {
				m.recompute(b)
				b.held = b.etcd
				m.h.pdb(b.etcd.obj)
			}
			m.queue = nil
			for i := 0; i < *propertySteps; i++ {
				m.step()
			}
			t.Logf("seed %d: %d steps, %v", seed, *propertySteps, m.stats)
			if m.stats["disrupted"] < 100 || m.stats["denied"] < 100 || m.stats["evict-429"] == 0 {
				t.Errorf("the run exercised too little to mean anything: %v", m.stats)
			}
		})
	}
}
