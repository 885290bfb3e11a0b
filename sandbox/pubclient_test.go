package sandbox

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	kruisebeta "github.com/budgetguard/budgetguard/apis/kruise/policy/v1beta1"
	"github.com/budgetguard/budgetguard/internal/testobj"
)

var _ pubClient = (*fakePUBs)(nil)

// fakePUBs is a pubClient in memory, for the handlers and the status
// controller without an API server. Like the API server, it gives each write
// a new resourceVersion, refuses a status update whose resourceVersion is
// not the stored one with a conflict, and replays to a watch the events
// after the resourceVersion it starts from.
type fakePUBs struct {
	mu       sync.Mutex
	rv       int
	objs     map[cache.ObjectName]*kruisebeta.PodUnavailableBudget
	history  []watch.Event
	watchers []fakeWatch
	// beforeStatusUpdate, when set, is called with each status update
	// before it is applied; an error it returns is the update's.
	beforeStatusUpdate func(pub *kruisebeta.PodUnavailableBudget) error
	statusUpdates      int
}

// newFakePUBs holds the PUBs of ws, converted to v1beta1.
func newFakePUBs(t testing.TB, ws ...*testobj.PUBWrapper) *fakePUBs {
	t.Helper()
	f := &fakePUBs{objs: map[cache.ObjectName]*kruisebeta.PodUnavailableBudget{}}
	for _, w := range ws {
		f.set(betaPUB(t, w))
	}
	return f
}

// set stores pub as it is, with a new resourceVersion, as another writer
// would.
func (f *fakePUBs) set(pub *kruisebeta.PodUnavailableBudget) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.storeLocked(pub.DeepCopy())
}

func (f *fakePUBs) storeLocked(pub *kruisebeta.PodUnavailableBudget) {
	key := cache.MetaObjectToName(pub)
	typ := watch.Modified
	if f.objs[key] == nil {
		typ = watch.Added
	}
	f.rv++
	pub.ResourceVersion = strconv.Itoa(f.rv)
	f.objs[key] = pub
	ev := watch.Event{Type: typ, Object: pub.DeepCopy()}
	f.history = append(f.history, ev)
	for _, w := range f.watchers {
		w.send(ev)
	}
}

// fakeWatch is one watch of fakePUBs: the events of a namespace ("" for
// all) until it is stopped.
type fakeWatch struct {
	namespace string
	ch        chan watch.Event
	w         *watch.ProxyWatcher
}

func (w fakeWatch) send(ev watch.Event) {
	pub := ev.Object.(*kruisebeta.PodUnavailableBudget)
	if w.namespace != "" && pub.Namespace != w.namespace {
		return
	}
	select {
	case <-w.w.StopChan():
	case w.ch <- watch.Event{Type: ev.Type, Object: pub.DeepCopy()}:
	}
}

func (f *fakePUBs) Get(_ context.Context, namespace, name string) (*kruisebeta.PodUnavailableBudget, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	pub := f.objs[cache.ObjectName{Namespace: namespace, Name: name}]
	if pub == nil {
		return nil, apierrors.NewNotFound(kruisebeta.Resource(PUBResource), name)
	}
	return pub.DeepCopy(), nil
}

func (f *fakePUBs) UpdateStatus(_ context.Context, pub *kruisebeta.PodUnavailableBudget) error {
	f.mu.Lock()
	f.statusUpdates++
	hook := f.beforeStatusUpdate
	f.mu.Unlock()
	if hook != nil {
		if err := hook(pub); err != nil {
			return err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	cur := f.objs[cache.MetaObjectToName(pub)]
	if cur == nil {
		return apierrors.NewNotFound(kruisebeta.Resource(PUBResource), pub.Name)
	}
	if pub.ResourceVersion != cur.ResourceVersion {
		return apierrors.NewConflict(kruisebeta.Resource(PUBResource), pub.Name, nil)
	}
	next := cur.DeepCopy()
	next.Status = *pub.Status.DeepCopy()
	f.storeLocked(next)
	return nil
}

func (f *fakePUBs) List(_ context.Context, namespace string, _ metav1.ListOptions) (*kruisebeta.PodUnavailableBudgetList, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	list := &kruisebeta.PodUnavailableBudgetList{ListMeta: metav1.ListMeta{ResourceVersion: strconv.Itoa(f.rv)}}
	for key, pub := range f.objs {
		if namespace == "" || key.Namespace == namespace {
			list.Items = append(list.Items, *pub.DeepCopy())
		}
	}
	slices.SortFunc(list.Items, func(a, b kruisebeta.PodUnavailableBudget) int {
		return strings.Compare(cache.MetaObjectToName(&a).String(), cache.MetaObjectToName(&b).String())
	})
	return list, nil
}

func (f *fakePUBs) Watch(_ context.Context, namespace string, opts metav1.ListOptions) (watch.Interface, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	from, _ := strconv.Atoi(opts.ResourceVersion)
	ch := make(chan watch.Event, 1000)
	w := fakeWatch{namespace: namespace, ch: ch, w: watch.NewProxyWatcher(ch)}
	for _, ev := range f.history {
		if rv, _ := strconv.Atoi(ev.Object.(*kruisebeta.PodUnavailableBudget).ResourceVersion); rv > from {
			w.send(ev)
		}
	}
	f.watchers = append(f.watchers, w)
	return w.w, nil
}

// statusUpdateCount is how many status updates were asked for.
func (f *fakePUBs) statusUpdateCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.statusUpdates
}
