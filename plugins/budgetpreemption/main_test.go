package budgetpreemption

import (
	"os"
	"testing"

	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"
)

func TestMain(m *testing.M) {
	// The scheduling queue and the Executor record into the scheduler's
	// metrics, which exist only once registered.
	schedmetrics.Register()
	os.Exit(m.Run())
}
