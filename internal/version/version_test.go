package version

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"

	"github.com/budgetguard/budgetguard"
)

func TestFromBuildInfo(t *testing.T) {
	bi := &debug.BuildInfo{
		Deps: []*debug.Module{
			{Path: "k8s.io/kubernetes", Version: "v1.36.3"},
			{Path: "sigs.k8s.io/descheduler", Version: "v0.36.0"},
			{Path: "k8s.io/api", Version: "v0.0.0", Replace: &debug.Module{Path: "k8s.io/api", Version: "v0.36.3"}},
		},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"}},
	}
	got := fromBuildInfo(bi, true)
	// The release in VERSION, as hack/version.sh names an untagged commit;
	// a modified tree does not change it.
	dev := budgetguard.Release() + "-dev.g0123456"
	want := Info{Version: dev, Kubernetes: "v1.36.3", Descheduler: "v0.36.0", Go: runtime.Version()}
	if got != want {
		t.Errorf("fromBuildInfo = %+v, want %+v", got, want)
	}
	none := fromBuildInfo(nil, false)
	if none.Version != budgetguard.Release()+"-dev" || none.Kubernetes != "unknown" {
		t.Errorf("without build info: %+v", none)
	}
	// A test binary carries no VCS stamp: the version is still not empty.
	if v := Get().Version; v == "" {
		t.Error("Get().Version is empty")
	}
	// Unknown versions are left out of the line.
	if s := none.String(); !strings.HasPrefix(s, "budgetguard "+budgetguard.Release()+"-dev (go") {
		t.Errorf("String() = %q", s)
	}
	if s, want := got.String(), "budgetguard "+dev+" (Kubernetes v1.36.3, descheduler v0.36.0, "+runtime.Version()+")"; s != want {
		t.Errorf("String() = %q, want %q", s, want)
	}
	got.Descheduler = "unknown"
	if s, want := got.String(), "budgetguard "+dev+" (Kubernetes v1.36.3, "+runtime.Version()+")"; s != want {
		t.Errorf("String() without the descheduler = %q, want %q", s, want)
	}
}

func TestLinkerVersionWins(t *testing.T) {
	defer func(v string) { gitVersion = v }(gitVersion)
	gitVersion = "v9.9.9-test"
	if got := Get().Version; got != "v9.9.9-test" {
		t.Errorf("Version = %q, want the linker's v9.9.9-test", got)
	}
}

func TestBuildInfoMetric(t *testing.T) {
	RegisterMetrics()
	RegisterMetrics()
	i := Get()
	want := `
# HELP budgetguard_build_info [ALPHA] 1, labelled with budgetguard's version and the Kubernetes and descheduler versions it embeds.
# TYPE budgetguard_build_info gauge
budgetguard_build_info{descheduler_version="` + i.Descheduler + `",go_version="` + i.Go + `",kubernetes_version="` + i.Kubernetes + `",version="` + i.Version + `"} 1
`
	if err := testutil.GatherAndCompare(legacyregistry.DefaultGatherer, strings.NewReader(want), "budgetguard_build_info"); err != nil {
		t.Error(err)
	}
}

// The descheduler links Kubernetes' client libraries, not k8s.io/kubernetes:
// client-go v0.X.Y (here through a replace) is Kubernetes v1.X.Y.
func TestKubernetesFromClientGo(t *testing.T) {
	bi := &debug.BuildInfo{Deps: []*debug.Module{
		{Path: "k8s.io/client-go", Version: "v0.0.0", Replace: &debug.Module{Path: "k8s.io/client-go", Version: "v0.36.3"}},
		{Path: "sigs.k8s.io/descheduler", Version: "v0.36.0"},
	}}
	if got := fromBuildInfo(bi, true).Kubernetes; got != "v1.36.3" {
		t.Errorf("Kubernetes = %q, want v1.36.3 from client-go v0.36.3", got)
	}
	bi.Deps = append(bi.Deps, &debug.Module{Path: "k8s.io/kubernetes", Version: "v1.36.2"})
	if got := fromBuildInfo(bi, true).Kubernetes; got != "v1.36.2" {
		t.Errorf("Kubernetes = %q, want k8s.io/kubernetes' v1.36.2 over client-go's", got)
	}
}
