package testenv

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PUBStatusIs holds when the PodUnavailableBudget's status is up to date
// (observedGeneration == generation) and has currentAvailable available,
// desiredAvailable desired and unavailableAllowed allowed. It needs the
// Env's Kruise client.
func (e *Env) PUBStatusIs(ns, name string, available, desired, allowed int32) Condition {
	return func(ctx context.Context) (bool, error) {
		if e.Kruise == nil {
			return false, fmt.Errorf("testenv: this Env has no Kruise client (WithKruise)")
		}
		pub, err := e.Kruise.PolicyV1alpha1().PodUnavailableBudgets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		st := pub.Status
		if st.ObservedGeneration != pub.Generation || st.CurrentAvailable != available || st.DesiredAvailable != desired || st.UnavailableAllowed != allowed {
			return false, fmt.Errorf("pub %s/%s: generation %d, status observedGeneration %d currentAvailable %d desiredAvailable %d unavailableAllowed %d",
				ns, name, pub.Generation, st.ObservedGeneration, st.CurrentAvailable, st.DesiredAvailable, st.UnavailableAllowed)
		}
		return true, nil
	}
}
