package budgetevictor

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"
)

func TestSetDefaults(t *testing.T) {
	tests := []struct {
		name string
		in   *BudgetAwareEvictorArgs
		want *BudgetAwareEvictorArgs
	}{
		{
			name: "empty",
			in:   &BudgetAwareEvictorArgs{},
			want: &BudgetAwareEvictorArgs{HonorSafeToEvict: ptr.To(true), CacheSyncTimeoutSeconds: ptr.To(DefaultCacheSyncTimeoutSeconds)},
		},
		{
			name: "set values are kept",
			in:   &BudgetAwareEvictorArgs{HonorSafeToEvict: ptr.To(false), CacheSyncTimeoutSeconds: ptr.To[int32](5)},
			want: &BudgetAwareEvictorArgs{HonorSafeToEvict: ptr.To(false), CacheSyncTimeoutSeconds: ptr.To[int32](5)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			SetDefaultsBudgetAwareEvictorArgs(tt.in)
			if diff := cmp.Diff(tt.want, tt.in); diff != "" {
				t.Errorf("defaults (-want,+got):\n%s", diff)
			}
		})
	}
}
