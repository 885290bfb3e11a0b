package budgetevictor

import (
	"context"
	"testing"

	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
	frameworkfake "sigs.k8s.io/descheduler/pkg/framework/fake"
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

// TestNewRejectsInvalidArgs checks that New refuses args of another type,
// and validates again.
func TestNewRejectsInvalidArgs(t *testing.T) {
	client := fake.NewClientset()
	handle := &frameworkfake.HandleImpl{ClientsetImpl: client, SharedInformerFactoryImpl: informers.NewSharedInformerFactory(client, 0)}
	if _, err := New(context.Background(), &policyv1.Eviction{}, handle); err == nil {
		t.Fatal("New accepted args of the wrong type")
	}
	_, err := New(context.Background(), &BudgetAwareEvictorArgs{CacheSyncTimeoutSeconds: ptr.To[int32](0)}, handle)
	if err == nil {
		t.Fatal("New accepted invalid args")
	}
}
