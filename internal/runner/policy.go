package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"

	kruiseclientset "github.com/openkruise/kruise-api/client/clientset/versioned"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"sigs.k8s.io/descheduler/cmd/descheduler/app/options"
	deschedulermetrics "sigs.k8s.io/descheduler/metrics"
	"sigs.k8s.io/descheduler/pkg/api"
	"sigs.k8s.io/descheduler/pkg/descheduler"
	"sigs.k8s.io/descheduler/pkg/features"
	"sigs.k8s.io/descheduler/pkg/framework/pluginregistry"

	"github.com/budgetguard/budgetguard/internal/deschedulerpolicy"
	"github.com/budgetguard/budgetguard/internal/report"
	"github.com/budgetguard/budgetguard/plugins/budget"
	"github.com/budgetguard/budgetguard/plugins/budgetevictor"
	"github.com/budgetguard/budgetguard/sandbox"
)

// The descheduler's plugin registry is global; it is set up once per process
// and BudgetAwareEvictor reaches the control plane of the current run
// through current.
var (
	setupOnce sync.Once
	current   struct {
		sync.Mutex
		cp *sandbox.ControlPlane
	}
)

var errNoControlPlane = errors.New("no sandbox control plane is running")

// setupDeschedulerPlugins registers the stock descheduler plugins and
// BudgetAwareEvictor, once per process, and returns the registry.
func setupDeschedulerPlugins() pluginregistry.Registry {
	setupOnce.Do(func() {
		deschedulerpolicy.SetupPlugins(budgetevictor.Options{
			Kruise: func() (kruiseclientset.Interface, discovery.DiscoveryInterface, error) {
				current.Lock()
				defer current.Unlock()
				if current.cp == nil {
					return nil, nil, errNoControlPlane
				}
				return current.cp.KruiseClient, current.cp.Client.Discovery(), nil
			},
			PUBv1beta1: func() (rest.Interface, error) {
				current.Lock()
				defer current.Unlock()
				if current.cp == nil {
					return nil, errNoControlPlane
				}
				return budget.NewPUBv1beta1Client(current.cp.Config)
			},
			Workloads: func() (kubernetes.Interface, error) {
				current.Lock()
				defer current.Unlock()
				if current.cp == nil {
					return nil, errNoControlPlane
				}
				return current.cp.Client, nil
			},
		})
		deschedulermetrics.Register()
	})
	return pluginregistry.PluginRegistry
}

func setCurrent(cp *sandbox.ControlPlane) {
	current.Lock()
	current.cp = cp
	current.Unlock()
}

// checkPolicy checks the policy strictly, as the budgetguard descheduler
// binary does, before any control plane starts. dir is a scratch directory.
func checkPolicy(dir, source string, data []byte) (string, error) {
	// Checked from memory, so that errors name source, not the scratch
	// copy that loadPolicy reads.
	if err := deschedulerpolicy.CheckPolicy(data, setupDeschedulerPlugins()); err != nil {
		return "", fmt.Errorf("descheduler policy %s: %w", source, err)
	}
	path := filepath.Join(dir, "descheduler-policy.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return "", err
	}
	return path, nil
}

// loadPolicy loads the policy file at path with the budgetguard descheduler's
// LoadPolicy (strict check, then the stock decoding, validation and
// defaulting) and, for ModeUpstream, rewrites it with UpstreamPolicy. Then,
// as the binary does at start, it logs and exports where BudgetAwareEvictor
// is enabled in each profile of the policy that will run.
func loadPolicy(path, source string, client kubernetes.Interface, mode report.Mode) (*api.DeschedulerPolicy, []string, error) {
	policy, err := deschedulerpolicy.LoadPolicy(path, client, setupDeschedulerPlugins())
	if err != nil {
		return nil, nil, fmt.Errorf("descheduler policy %s: %w", source, err)
	}
	var notes []string
	if mode == report.ModeUpstream {
		notes = UpstreamPolicy(policy)
	}
	// loadPolicy takes no context (see runner.go); the background logger is
	// the one klog.FromContext falls back to.
	logger := klog.Background()
	for _, p := range deschedulerpolicy.ProfilePlugins(policy) {
		budget.ReportProfile(logger, "descheduler", p.Name, p.Plugins)
	}
	return policy, notes, nil
}

// UpstreamPolicy removes BudgetAwareEvictor from every profile of policy:
// from the filter and preEvictionFilter plugins and from the plugin configs.
// DefaultEvictor stays (the descheduler's defaulting always adds it). It
// returns one line per profile it changed.
func UpstreamPolicy(policy *api.DeschedulerPolicy) []string {
	var notes []string
	isOurs := func(name string) bool { return name == budgetevictor.PluginName }
	for i := range policy.Profiles {
		p := &policy.Profiles[i]
		before := len(p.Plugins.Filter.Enabled) + len(p.Plugins.PreEvictionFilter.Enabled) + len(p.PluginConfigs)
		p.Plugins.Filter.Enabled = slices.DeleteFunc(p.Plugins.Filter.Enabled, isOurs)
		p.Plugins.PreEvictionFilter.Enabled = slices.DeleteFunc(p.Plugins.PreEvictionFilter.Enabled, isOurs)
		p.PluginConfigs = slices.DeleteFunc(p.PluginConfigs, func(pc api.PluginConfig) bool { return isOurs(pc.Name) })
		if after := len(p.Plugins.Filter.Enabled) + len(p.Plugins.PreEvictionFilter.Enabled) + len(p.PluginConfigs); after != before {
			notes = append(notes, fmt.Sprintf("descheduler profile %s runs without %s", p.Name, budgetevictor.PluginName))
		}
	}
	return notes
}

// runDescheduler runs one descheduling loop of the real descheduler with
// policy, as the descheduler's Run does once it has its clients.
func runDescheduler(ctx context.Context, client kubernetes.Interface, policy *api.DeschedulerPolicy) error {
	rs, err := options.NewDeschedulerServer()
	if err != nil {
		return fmt.Errorf("descheduler options: %w", err)
	}
	rs.Client, rs.EventClient = client, client
	rs.DefaultFeatureGates = features.DefaultMutableFeatureGate
	rs.DeschedulingInterval = 0
	// The descheduler logs a failed loop and returns nil; its Run does the
	// same.
	return descheduler.RunDeschedulerStrategies(ctx, rs, policy, "policy/v1")
}
