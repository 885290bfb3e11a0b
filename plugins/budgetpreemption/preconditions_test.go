package budgetpreemption

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// TestEvictionCarriesTheDecidedPodsPreconditions: a victim that spends no
// budget because it is not Ready is evicted with the resourceVersion it was
// decided on, so that one which turned Ready before the eviction landed is
// refused with a conflict, not taken unaccounted (its PUB, which no API
// server checks, would be broken); the UID alone does not catch that.
func TestEvictionCarriesTheDecidedPodsPreconditions(t *testing.T) {
	var mu sync.Mutex
	bodies := map[string][]byte{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies[r.URL.Path] = body
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(&metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess})
	}))
	t.Cleanup(ts.Close)
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: ts.URL})
	if err != nil {
		t.Fatal(err)
	}
	notReady := pod("sleepy", "n1", "web", 0, false).Obj()
	notReady.ResourceVersion = "7"
	ready := pod("busy", "n1", "web", 0, true).Obj()
	ready.ResourceVersion = "8"
	e := newEnv(t, nil, []*v1.Node{node("n1")}, []*v1.Pod{notReady, ready}, []*policyv1.PodDisruptionBudget{appPDB("web", 1, 0, 1).Obj()})
	e.pl.fh = &evictionHandle{Handle: e.fw, cs: cs}
	p := testPreemptor{preemptor("1", 100)}
	for _, tc := range []struct {
		victim *v1.Pod
		wantRV *string
	}{{notReady, ptr.To("7")}, {ready, nil}} {
		if err := e.pl.evict(e.ctx, &testCandidate{"n1", []*v1.Pod{tc.victim}}, p, tc.victim); err != nil {
			t.Fatalf("evict %s: %v", tc.victim.Name, err)
		}
		mu.Lock()
		body := bodies["/api/v1/namespaces/"+ns+"/pods/"+tc.victim.Name+"/eviction"]
		mu.Unlock()
		var ev policyv1.Eviction
		if err := json.Unmarshal(body, &ev); err != nil {
			t.Fatalf("eviction body of %s: %v (%s)", tc.victim.Name, err, body)
		}
		var got *metav1.Preconditions
		if ev.DeleteOptions != nil {
			got = ev.DeleteOptions.Preconditions
		}
		want := &metav1.Preconditions{UID: ptr.To(tc.victim.UID), ResourceVersion: tc.wantRV}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("preconditions of %s's eviction (-want,+got):\n%s", tc.victim.Name, diff)
		}
	}
}
