// Package kubectl tests kubectl-budgetguard ("why" and "lint") against the
// real control plane of package sandbox, with golden outputs in testdata
// (go test ./test/kubectl/ -update rewrites them).
package kubectl

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/budgetguard/budgetguard/internal/testenv"
	"github.com/budgetguard/budgetguard/sandbox"
)

// cp is the control plane all tests of this package share; env works
// through its client.
var (
	cp  *sandbox.ControlPlane
	env *testenv.Env
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestMain starts one control plane, with the simulated PUB status
// controller, authorizing by RBAC, for the whole package. Tests isolate themselves in their own
// namespaces and nodes.
func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	opts := sandbox.DefaultOptions()
	opts.SimulatePUBStatus = true
	// The test server authorizes everything unless told otherwise; the
	// plugin is tested as a user with the rights a real one has.
	opts.APIServerFlags = []string{"--authorization-mode=RBAC"}
	var err error
	if cp, err = sandbox.Start(ctx, opts); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: start the sandbox control plane: %v\n", err)
		return 1
	}
	env = testenv.New(cp.Client).WithKruise(cp.KruiseClient).WithConfig(cp.Config)
	code := m.Run()
	if err := cp.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: stop the sandbox control plane: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}
