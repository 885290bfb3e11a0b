package audit

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// counts is a point of a series without its time.
type counts struct {
	healthy, desired int32
	met, gone        bool
}

// seriesCounts returns the series of ref without its times, after checking
// that its times increase.
func seriesCounts(t *testing.T, all []BudgetSeries, ref BudgetRef) []counts {
	t.Helper()
	for _, s := range all {
		if s.Budget != ref {
			continue
		}
		var out []counts
		for i, p := range s.Points {
			if i > 0 && !p.At.After(s.Points[i-1].At) {
				t.Errorf("%v: point %d at %v is not after point %d at %v", ref, i, p.At, i-1, s.Points[i-1].At)
			}
			out = append(out, counts{p.Healthy, p.Desired, p.Met, p.Gone})
		}
		return out
	}
	t.Errorf("no series for %v", ref)
	return nil
}

// checkLowest checks that each met budget's lowest healthy count in the
// summaries is the lowest of its series' met points: the series is the
// count the summaries were made of.
func checkLowest(t *testing.T, res Result, all []BudgetSeries) {
	t.Helper()
	for _, b := range res.Budgets {
		if !b.Met {
			continue
		}
		lowest := int32(-1)
		for _, s := range all {
			for _, p := range s.Points {
				if s.Budget == b.Budget && p.Met && !p.Gone && (lowest < 0 || p.Healthy < lowest) {
					lowest = p.Healthy
				}
			}
		}
		if lowest != b.LowestHealthy {
			t.Errorf("%v: lowest met point of the series %d, summary's LowestHealthy %d", b.Budget, lowest, b.LowestHealthy)
		}
	}
}

func TestHealthySeriesFollowsTheReplay(t *testing.T) {
	h := newHarness(t, testOptions())
	if s := h.a.HealthySeries(); s != nil {
		t.Errorf("HealthySeries before Finish = %v, want nil", s)
	}
	h.createPDB(pdb("web", 2).Obj())
	h.createPDB(pdb("never", 5).Obj())

	b := webPod("b").Ready(false)
	h.createPod(webPod("a").Obj())
	h.createPod(b.Obj()) // not Ready: no change
	h.createPod(runningPod("never-0").Label("app", "never").Obj())
	h.updatePod(b.Ready(true).Obj())  // met at 2
	h.updatePod(b.Ready(false).Obj()) // 1
	h.updatePod(b.Ready(true).Obj())  // 2 again
	h.updatePDB(pdb("web", 3).Obj())  // desired 3
	h.createPod(webPod("c").Obj())    // 3
	res := h.finish()
	all := h.a.HealthySeries()

	if diff := cmp.Diff([]counts{{0, 2, false, false}, {1, 2, false, false}, {2, 2, true, false}, {1, 2, true, false}, {2, 2, true, false}, {2, 3, true, false}, {3, 3, true, false}},
		seriesCounts(t, all, ref(KindPDB, "web")), cmp.AllowUnexported(counts{})); diff != "" {
		t.Errorf("pdb web (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff([]counts{{0, 5, false, false}, {1, 5, false, false}}, seriesCounts(t, all, ref(KindPDB, "never")), cmp.AllowUnexported(counts{})); diff != "" {
		t.Errorf("pdb never (-want,+got):\n%s", diff)
	}
	if len(all) != 2 || all[0].Budget != ref(KindPDB, "never") {
		t.Errorf("series %v, want pdb never then pdb web", all)
	}
	checkLowest(t, res, all)

	// A copy: changing it changes nothing the auditor holds.
	all[0].Points[0].Healthy = 99
	if again := h.a.HealthySeries(); again[0].Points[0].Healthy == 99 {
		t.Error("HealthySeries returned the auditor's own points")
	}
}

// The series falls with the disruptions the audit log shows, from when
// each took effect, and ends when the budget is deleted.
func TestHealthySeriesFallsWithDisruptionsAndEnds(t *testing.T) {
	h := newHarness(t, testOptions())
	h.createPDB(pdb("web", 2).Obj())
	for _, n := range []string{"a", "b", "c"} {
		h.createPod(webPod(n).Obj())
	}
	h.log(logged{ua: uaScheduler, action: ActionDelete, pod: "a", code: 200})
	h.log(logged{ua: uaScheduler, action: ActionDelete, pod: "b", code: 200})
	h.change("delete PDB", "web", func() error {
		return h.kube.PolicyV1().PodDisruptionBudgets(testNS).Delete(h.ctx, "web", metav1.DeleteOptions{})
	})
	res := h.finish()
	all := h.a.HealthySeries()
	want := []counts{{0, 2, false, false}, {1, 2, false, false}, {2, 2, true, false}, {3, 2, true, false}, {2, 2, true, false}, {1, 2, true, false}, {1, 2, true, true}}
	if diff := cmp.Diff(want, seriesCounts(t, all, ref(KindPDB, "web")), cmp.AllowUnexported(counts{})); diff != "" {
		t.Errorf("pdb web (-want,+got):\n%s", diff)
	}
	if len(res.Violations) != 1 {
		t.Errorf("violations %+v, want the second delete's", res.Violations)
	}
	checkLowest(t, res, all)
}
