package e2e

import (
	"os"
	"testing"
)

// TestMain removes the binaries buildBinaries built for the package's
// tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	os.Exit(code)
}
