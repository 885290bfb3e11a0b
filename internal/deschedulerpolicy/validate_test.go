package deschedulerpolicy

import (
	"strings"
	"testing"
)

func TestValidatePolicyFile(t *testing.T) {
	registry := setup(t)
	tests := []struct {
		name    string
		policy  string
		wantErr string
	}{
		{name: "valid", policy: base},
		{
			name:   "a priority class by name, which only a cluster could resolve",
			policy: strings.Replace(base, "  - name: DefaultEvictor\n", "  - name: DefaultEvictor\n    args:\n      priorityThreshold:\n        name: high\n", 1),
		},
		{
			name:    "what CheckPolicy checks",
			policy:  strings.Replace(base, "preevictionfilter:", "preEvictionFilter:", 1),
			wantErr: `profiles[0].plugins.preEvictionFilter: unknown field`,
		},
		{
			name:    "the stock validation",
			policy:  base + "metricsProviders:\n- source: KubernetesMetrics\n- source: KubernetesMetrics\n",
			wantErr: `metric provider "KubernetesMetrics" is already configured`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writePolicy(t, tt.policy)
			policy, err := ValidatePolicyFile(path, registry)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("ValidatePolicyFile: %v", err)
				}
				// The stock defaulting ran: DefaultEvictor comes first.
				if got := policy.Profiles[0].Plugins.Filter.Enabled; len(got) == 0 || got[0] != "DefaultEvictor" {
					t.Errorf("filter plugins %v, want DefaultEvictor first", got)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), path) {
				t.Errorf("error %v, want one naming %s and containing %q", err, path, tt.wantErr)
			}
		})
	}
}
