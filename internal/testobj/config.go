package testobj

import (
	"fmt"
	"strings"
)

// SchedulerConfig describes a kubescheduler.config.k8s.io/v1
// KubeSchedulerConfiguration with one profile.
type SchedulerConfig struct {
	// SchedulerName names the profile; "budgetguard-scheduler" when empty.
	SchedulerName string
	// Kubeconfig, when set, is clientConnection.kubeconfig, and leader
	// election is off.
	Kubeconfig string
	// Upstream keeps DefaultPreemption and leaves BudgetAwarePreemption out.
	Upstream bool
	// Args are BudgetAwarePreemption's args on one line, a YAML flow
	// mapping such as "{actuation: Delete}"; "" leaves the pluginConfig out.
	Args string
}

// YAML renders the configuration.
func (c SchedulerConfig) YAML() string {
	name := c.SchedulerName
	if name == "" {
		name = "budgetguard-scheduler"
	}
	var b strings.Builder
	b.WriteString("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n")
	if c.Kubeconfig != "" {
		fmt.Fprintf(&b, "clientConnection:\n  kubeconfig: %q\nleaderElection:\n  leaderElect: false\n", c.Kubeconfig)
	}
	fmt.Fprintf(&b, "profiles:\n- schedulerName: %s\n", name)
	if c.Upstream {
		return b.String()
	}
	b.WriteString(`  plugins:
    preEnqueue:
      enabled:
      - name: BudgetAwarePreemption
      disabled:
      - name: DefaultPreemption
    postFilter:
      enabled:
      - name: BudgetAwarePreemption
      disabled:
      - name: DefaultPreemption
    podGroupPostFilter:
      enabled:
      - name: BudgetAwarePreemption
      disabled:
      - name: DefaultPreemption
`)
	if c.Args != "" {
		fmt.Fprintf(&b, "  pluginConfig:\n  - name: BudgetAwarePreemption\n    args: %s\n", c.Args)
	}
	return b.String()
}

// DeschedulerPolicy describes a descheduler/v1alpha2 DeschedulerPolicy with
// one profile, named "test", that runs one strategy plugin.
type DeschedulerPolicy struct {
	// NodeSelector, when set, is the policy's nodeSelector.
	NodeSelector string
	// Namespace, when set, keeps DefaultEvictor to pods in that namespace
	// (namespaceLabelSelector on kubernetes.io/metadata.name).
	Namespace string
	// BudgetAware enables BudgetAwareEvictor beside DefaultEvictor at
	// filter and preEvictionFilter.
	BudgetAware bool
	// Strategy is the strategy plugin, e.g. "RemoveDuplicates".
	Strategy string
	// StrategyArgs are its args on one line, a YAML flow mapping; "" for
	// none.
	StrategyArgs string
	// ExtensionPoint is where the strategy is enabled: "balance" (when
	// empty) or "deschedule".
	ExtensionPoint string
}

// YAML renders the policy.
func (p DeschedulerPolicy) YAML() string {
	var b strings.Builder
	b.WriteString("apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\n")
	if p.NodeSelector != "" {
		fmt.Fprintf(&b, "nodeSelector: %q\n", p.NodeSelector)
	}
	b.WriteString("profiles:\n- name: test\n  pluginConfig:\n  - name: DefaultEvictor\n")
	if p.Namespace != "" {
		fmt.Fprintf(&b, "    args:\n      namespaceLabelSelector:\n        matchLabels:\n          kubernetes.io/metadata.name: %q\n", p.Namespace)
	}
	evictors := "[DefaultEvictor]"
	if p.BudgetAware {
		evictors = "[DefaultEvictor, BudgetAwareEvictor]"
		b.WriteString("  - name: BudgetAwareEvictor\n")
	}
	fmt.Fprintf(&b, "  - name: %s\n", p.Strategy)
	if p.StrategyArgs != "" {
		fmt.Fprintf(&b, "    args: %s\n", p.StrategyArgs)
	}
	point := p.ExtensionPoint
	if point == "" {
		point = "balance"
	}
	fmt.Fprintf(&b, "  plugins:\n    filter:\n      enabled: %s\n    preevictionfilter:\n      enabled: %s\n    %s:\n      enabled: [%s]\n",
		evictors, evictors, point, p.Strategy)
	return b.String()
}
