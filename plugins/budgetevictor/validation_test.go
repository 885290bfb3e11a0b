package budgetevictor

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

func TestValidateBudgetAwareEvictorArgs(t *testing.T) {
	path := field.NewPath("profiles").Index(0).Child("pluginConfig").Index(1).Child("args")
	tests := []struct {
		name    string
		args    *BudgetAwareEvictorArgs
		wantErr string
	}{
		{name: "defaults", args: &BudgetAwareEvictorArgs{HonorSafeToEvict: ptr.To(true), CacheSyncTimeoutSeconds: ptr.To[int32](30)}},
		{name: "unset", args: &BudgetAwareEvictorArgs{}},
		{
			name:    "zero timeout",
			args:    &BudgetAwareEvictorArgs{CacheSyncTimeoutSeconds: ptr.To[int32](0)},
			wantErr: "profiles[0].pluginConfig[1].args.cacheSyncTimeoutSeconds: Invalid value: 0: must be between 1 and 600",
		},
		{
			name:    "huge timeout",
			args:    &BudgetAwareEvictorArgs{CacheSyncTimeoutSeconds: ptr.To[int32](601)},
			wantErr: "profiles[0].pluginConfig[1].args.cacheSyncTimeoutSeconds: Invalid value: 601: must be between 1 and 600",
		},
		{name: "nil", args: nil, wantErr: "profiles[0].pluginConfig[1].args: Required value: BudgetAwareEvictorArgs are required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateBudgetAwareEvictorArgs(path, tt.args)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.wantErr {
				t.Errorf("error = %q, want %q", got, tt.wantErr)
			}
		})
	}
}
