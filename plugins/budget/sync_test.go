package budget

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/budgetguard/budgetguard/internal/testobj"
)

// TestInitialListsCountedOnce: a Cache whose informers list many budgets
// over many pods of one namespace counts the pods against the budgets once,
// after the initial lists, not once per budget listed: counting the whole
// namespace again for each PDB of the initial list, at 30,000 pods and
// 3,000 PDBs (the descheduling benchmark at 1,000 nodes), would keep the
// Cache unsynced for more than two minutes, and BudgetAwareEvictor would
// refuse every pod meanwhile. The live counts after the sync are those of every budget over every pod.
func TestInitialListsCountedOnce(t *testing.T) {
	const apps, perApp, budgets = 40, 5, 30
	var objs []runtime.Object
	for a := range apps {
		for i := range perApp {
			// One pod of each application is not Ready.
			objs = append(objs, testobj.RunningPod(ns, fmt.Sprintf("app-%02d-%d", a, i)).Label("app", fmt.Sprintf("app-%02d", a)).Ready(i != 0).Obj())
		}
	}
	var pdbs []*policyv1.PodDisruptionBudget
	for a := range budgets {
		pdb := testobj.MakePDB().Namespace(ns).Name(fmt.Sprintf("app-%02d", a)).MatchLabels("app", fmt.Sprintf("app-%02d", a)).MinAvailable(2).Obj()
		pdbs = append(pdbs, pdb)
		objs = append(objs, pdb)
	}
	ctx, cancel := context.WithTimeout(klog.NewContext(context.Background(), ktesting.NewLogger(t, ktesting.NewConfig())), time.Minute)
	defer cancel()
	factory := informers.NewSharedInformerFactory(fake.NewClientset(objs...), 0)
	c, err := New(ctx, factory, Options{})
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("the Cache did not sync")
	}
	if n := c.recounts.Load(); n != 1 {
		t.Errorf("the initial lists of %d pods and %d PDBs cost %d counts of the namespace, want 1", apps*perApp, budgets, n)
	}
	for _, pdb := range pdbs {
		if got := c.LiveHealthy(KindPDB, ns, pdb.Name); got != perApp-1 {
			t.Errorf("pdb %s: %d healthy pods counted, want %d", pdb.Name, got, perApp-1)
		}
	}
	if !c.liveCounted() {
		t.Error("the live count is not on after the sync")
	}

	// After the sync, a new budget is counted at once.
	late := testobj.MakePDB().Namespace(ns).Name("late").MatchLabels("app", fmt.Sprintf("app-%02d", apps-1)).MinAvailable(2).Obj()
	c.onPDB(late, false)
	if got := c.LiveHealthy(KindPDB, ns, "late"); got != perApp-1 {
		t.Errorf("pdb late, added after the sync: %d healthy pods counted, want %d", got, perApp-1)
	}
}

// BenchmarkCacheSync measures a Cache's start over one namespace of 30,000
// pods in applications of 10 and 3,000 PDBs, one per application (the
// descheduling benchmark's cluster at 1,000 nodes), served by a fake
// clientset: the informers are started and synced, and then the Cache is
// built on them and synced, as BudgetAwareEvictor builds it on the
// descheduler's informers (it registers its informers first, and builds
// the Cache at its first use). Its handlers then receive every pod and PDB
// the stores hold. The reference, cache=none, is the same informers synced
// with no Cache on them: what the descheduler's DefaultEvictor waits for.
func BenchmarkCacheSync(b *testing.B) {
	const pods, budgets = 30000, 3000
	objs := make([]runtime.Object, 0, pods+budgets)
	for i := range pods {
		app := fmt.Sprintf("app-%05d", i/10)
		objs = append(objs, testobj.RunningPod(ns, fmt.Sprintf("%s-%d", app, i%10)).Label("app", app).Obj())
	}
	for a := range budgets {
		app := fmt.Sprintf("app-%05d", a)
		objs = append(objs, testobj.MakePDB().Namespace(ns).Name(app).MatchLabels("app", app).MinAvailable(int32(10-a%4)).Obj())
	}
	client := fake.NewClientset(objs...)
	for _, withCache := range []bool{false, true} {
		name := "cache=none"
		if withCache {
			name = "cache=budget"
		}
		b.Run(name, func(b *testing.B) {
			for range b.N {
				ctx, cancel := context.WithCancel(context.Background())
				factory := informers.NewSharedInformerFactory(client, 0)
				RegisterInformers(factory, Options{})
				factory.Start(ctx.Done())
				for _, ok := range factory.WaitForCacheSync(ctx.Done()) {
					if !ok {
						b.Fatal("informers did not sync")
					}
				}
				if withCache {
					c, err := New(klog.NewContext(ctx, klog.LoggerWithName(logr.Discard(), "budget")), factory, Options{})
					if err != nil {
						b.Fatal(err)
					}
					if !c.WaitForCacheSync(ctx) {
						b.Fatal("the Cache did not sync")
					}
				}
				cancel()
				factory.Shutdown()
			}
		})
	}
}
