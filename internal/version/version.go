package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/budgetguard/budgetguard"
)

// gitVersion is set by the linker (-X); see the package doc.
var gitVersion string

// Info is a binary's version and what it embeds.
type Info struct {
	// Version is budgetguard's version, e.g. v0.2.0-3-gabcdef0.
	Version string `json:"version"`
	// Kubernetes is the version of k8s.io/kubernetes compiled in (the
	// kube-scheduler, kube-apiserver and controllers).
	Kubernetes string `json:"kubernetes"`
	// Descheduler is the version of sigs.k8s.io/descheduler compiled in.
	Descheduler string `json:"descheduler"`
	// Go is the Go version the binary was built with.
	Go string `json:"go"`
}

// String is the line --version prints, e.g. "budgetguard v0.2.0
// (Kubernetes v1.37.2, descheduler v0.36.0, go1.26.8)". An embedded
// version that is unknown, as the descheduler's in the scheduler binary,
// which does not link it, is left out.
func (i Info) String() string {
	parts := make([]string, 0, 3)
	for _, p := range []struct{ name, version string }{{"Kubernetes", i.Kubernetes}, {"descheduler", i.Descheduler}} {
		if p.version != unknown {
			parts = append(parts, p.name+" "+p.version)
		}
	}
	parts = append(parts, i.Go)
	return fmt.Sprintf("budgetguard %s (%s)", i.Version, strings.Join(parts, ", "))
}

// unknown is the version of a module the binary does not link.
const unknown = "unknown"

// Get returns the binary's version information.
func Get() Info {
	bi, ok := debug.ReadBuildInfo()
	return fromBuildInfo(bi, ok)
}

// fromBuildInfo reads the embedded module versions from bi, which is valid
// when ok; a module the binary does not link is "unknown".
func fromBuildInfo(bi *debug.BuildInfo, ok bool) Info {
	info := Info{Version: gitVersion, Kubernetes: unknown, Descheduler: unknown, Go: runtime.Version()}
	if !ok {
		if info.Version == "" {
			info.Version = budgetguard.Release() + "-dev"
		}
		return info
	}
	clientGo := ""
	for _, dep := range bi.Deps {
		v := dep.Version
		if dep.Replace != nil && dep.Replace.Version != "" {
			v = dep.Replace.Version
		}
		switch dep.Path {
		case "k8s.io/kubernetes":
			info.Kubernetes = v
		case "k8s.io/client-go":
			clientGo = v
		case "sigs.k8s.io/descheduler":
			info.Descheduler = v
		}
	}
	// A binary without k8s.io/kubernetes (the descheduler) embeds
	// Kubernetes' libraries: client-go v0.X.Y is released with Kubernetes
	// v1.X.Y.
	if info.Kubernetes == unknown && strings.HasPrefix(clientGo, "v0.") && clientGo != "v0.0.0" {
		info.Kubernetes = "v1." + strings.TrimPrefix(clientGo, "v0.")
	}
	if info.Version == "" {
		info.Version = fromVCS(bi)
	}
	return info
}

// fromVCS builds the version hack/version.sh would have given from the
// revision Go stamps into binaries built in a git checkout (go build or go
// run without make's -ldflags): <release>-dev.g<7 hex digits>, or
// <release>-dev without a revision. A tagged release is always built with
// -ldflags, so a revision alone never names the release itself.
func fromVCS(bi *debug.BuildInfo) string {
	var rev string
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			rev = s.Value
		}
	}
	if rev == "" {
		return budgetguard.Release() + "-dev"
	}
	return budgetguard.Release() + "-dev.g" + rev[:min(7, len(rev))]
}

var (
	buildInfo = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace:      "budgetguard",
		Name:           "build_info",
		Help:           "1, labelled with budgetguard's version and the Kubernetes and descheduler versions it embeds.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"version", "kubernetes_version", "descheduler_version", "go_version"})
	registerOnce sync.Once
)

// RegisterMetrics registers budgetguard_build_info in the legacy registry
// the components serve on /metrics. It is safe to call more than once.
func RegisterMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(buildInfo)
		i := Get()
		buildInfo.WithLabelValues(i.Version, i.Kubernetes, i.Descheduler, i.Go).Set(1)
	})
}
