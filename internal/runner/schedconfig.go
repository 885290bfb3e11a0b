package runner

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"k8s.io/klog/v2"
	schedv1 "k8s.io/kube-scheduler/config/v1"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	schedscheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	"k8s.io/utils/ptr"

	"github.com/budgetguard/budgetguard/internal/report"
	"github.com/budgetguard/budgetguard/internal/schedulerconfig"
	"github.com/budgetguard/budgetguard/plugins/budgetpreemption"
)

// defaultPreemption is the name of kube-scheduler's stock PostFilter plugin.
const defaultPreemption = "DefaultPreemption"

// schedulerConfig is a KubeSchedulerConfiguration ready for scheduler.New.
type schedulerConfig struct {
	config *schedconfig.KubeSchedulerConfiguration
	// notes say what the runner changed in the file, for the progress output.
	notes []string
}

// loadSchedulerConfig decodes and validates data (the scenario's
// KubeSchedulerConfiguration, or the shipped one; source names it in errors)
// the way kube-scheduler does and checks it as cmd/scheduler does (package
// schedulerconfig), then adds kube-scheduler's stock default-scheduler
// profile if there is none and, for ModeUpstream, rewrites it with
// UpstreamSchedulerConfig. The result is decoded and validated again.
// dir is a scratch directory for the files the loading reads.
func loadSchedulerConfig(logger klog.Logger, dir, source string, data []byte, mode report.Mode) (*schedulerConfig, error) {
	written, err := decodeSchedulerConfig(logger, dir, "scheduler-config.yaml", data)
	if err != nil {
		return nil, fmt.Errorf("scheduler configuration %s: %w", source, err)
	}
	// The file as written is checked in either mode: an upstream run must
	// not hide a mistake in the BudgetAwarePreemption args it drops. The
	// checks of where BudgetAwarePreemption and DefaultPreemption run apply
	// to budgetguard's run only; the upstream rewrite replaces one with the
	// other.
	check := schedulerconfig.Check
	if mode == report.ModeUpstream {
		check = schedulerconfig.CheckArgs
	}
	if err := check(written); err != nil {
		return nil, fmt.Errorf("scheduler configuration %s is invalid:\n%w", source, err)
	}
	versioned, err := decodeVersioned(data)
	if err != nil {
		return nil, fmt.Errorf("scheduler configuration %s: %w", source, err)
	}
	var notes []string
	if addDefaultProfile(versioned) {
		notes = append(notes, fmt.Sprintf("scheduler configuration %s has no %s profile; added kube-scheduler's stock one", source, defaultSchedulerName))
	}
	if mode == report.ModeUpstream {
		notes = append(notes, UpstreamSchedulerConfig(versioned)...)
	}
	effective, err := json.Marshal(versioned)
	if err != nil {
		return nil, fmt.Errorf("scheduler configuration %s: encode the %s version: %w", source, mode, err)
	}
	cfg, err := decodeSchedulerConfig(logger, dir, "scheduler-config-"+string(mode)+".json", effective)
	if err != nil {
		return nil, fmt.Errorf("scheduler configuration %s, as rewritten for the %s run: %w", source, mode, err)
	}
	// One scheduler per control plane: no leader election.
	cfg.LeaderElection.LeaderElect = false
	return &schedulerConfig{config: cfg, notes: notes}, nil
}

// decodeSchedulerConfig writes data to dir/name and loads it as the
// scheduler binary does (schedulerconfig.Load: kube-scheduler's own
// loading and validation).
func decodeSchedulerConfig(logger klog.Logger, dir, name string, data []byte) (*schedconfig.KubeSchedulerConfiguration, error) {
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return nil, err
	}
	return schedulerconfig.Load(logger, path)
}

// decodeVersioned decodes data strictly into the v1 type without defaulting,
// so that a rewrite sees what the file says.
func decodeVersioned(data []byte) (*schedv1.KubeSchedulerConfiguration, error) {
	obj, gvk, err := schedscheme.Codecs.UniversalDeserializer().Decode(data, nil, nil)
	if err != nil {
		return nil, err
	}
	cfg, ok := obj.(*schedv1.KubeSchedulerConfiguration)
	if !ok {
		return nil, fmt.Errorf("got %s, want %s KubeSchedulerConfiguration", gvk, schedv1.SchemeGroupVersion)
	}
	cfg.APIVersion = schedv1.SchemeGroupVersion.String()
	cfg.Kind = "KubeSchedulerConfiguration"
	return cfg, nil
}

const defaultSchedulerName = "default-scheduler"

// addDefaultProfile appends a profile named default-scheduler with
// kube-scheduler's default plugins when cfg has none, so that pods without a
// schedulerName are scheduled. It reports whether it added one.
func addDefaultProfile(cfg *schedv1.KubeSchedulerConfiguration) bool {
	if len(cfg.Profiles) == 0 {
		// kube-scheduler's defaulting adds default-scheduler itself.
		return false
	}
	for _, p := range cfg.Profiles {
		if ptr.Deref(p.SchedulerName, defaultSchedulerName) == defaultSchedulerName {
			return false
		}
	}
	cfg.Profiles = append(cfg.Profiles, schedv1.KubeSchedulerProfile{SchedulerName: ptr.To(defaultSchedulerName)})
	return true
}

// UpstreamSchedulerConfig rewrites every profile of cfg to use upstream
// DefaultPreemption in place of BudgetAwarePreemption: BudgetAwarePreemption
// leaves the enabled lists of preEnqueue, postFilter, podGroupPostFilter and multiPoint, DefaultPreemption
// leaves their disabled lists, and BudgetAwarePreemption's pluginConfig is
// dropped. Where a point still disables "*", DefaultPreemption is enabled
// there explicitly. It returns one line per profile it changed.
func UpstreamSchedulerConfig(cfg *schedv1.KubeSchedulerConfiguration) []string {
	var notes []string
	for i := range cfg.Profiles {
		p := &cfg.Profiles[i]
		changed := false
		if p.Plugins != nil {
			for _, set := range []*schedv1.PluginSet{&p.Plugins.PreEnqueue, &p.Plugins.PostFilter, &p.Plugins.PodGroupPostFilter, &p.Plugins.MultiPoint} {
				if rewritePluginSet(set) {
					changed = true
				}
			}
		}
		before := len(p.PluginConfig)
		p.PluginConfig = slices.DeleteFunc(p.PluginConfig, func(pc schedv1.PluginConfig) bool {
			return pc.Name == budgetpreemption.Name
		})
		if len(p.PluginConfig) != before {
			changed = true
		}
		if changed {
			notes = append(notes, fmt.Sprintf("profile %s uses %s in place of %s",
				ptr.Deref(p.SchedulerName, defaultSchedulerName), defaultPreemption, budgetpreemption.Name))
		}
	}
	return notes
}

// rewritePluginSet removes BudgetAwarePreemption from set's enabled plugins
// and DefaultPreemption from its disabled ones, and reports a change.
func rewritePluginSet(set *schedv1.PluginSet) bool {
	removed := false
	set.Enabled = slices.DeleteFunc(set.Enabled, func(p schedv1.Plugin) bool {
		if p.Name == budgetpreemption.Name {
			removed = true
			return true
		}
		return false
	})
	undisabled := false
	set.Disabled = slices.DeleteFunc(set.Disabled, func(p schedv1.Plugin) bool {
		if p.Name == defaultPreemption {
			undisabled = true
			return true
		}
		return false
	})
	if removed && slices.ContainsFunc(set.Disabled, func(p schedv1.Plugin) bool { return p.Name == "*" }) &&
		!slices.ContainsFunc(set.Enabled, func(p schedv1.Plugin) bool { return p.Name == defaultPreemption }) {
		set.Enabled = append(set.Enabled, schedv1.Plugin{Name: defaultPreemption})
	}
	return removed || undisabled
}
