// Package testmain lets the tests of a command run the command itself, in a
// child process, and see its output and exit code: the test binary, started
// again with an environment variable set, runs the command's main instead
// of the tests.
//
// A command's main_test.go calls Main from its TestMain, and Run from its
// tests.
package testmain

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runMainEnv, set to "1", makes a test binary run main instead of the tests.
const runMainEnv = "BUDGETGUARD_TESTMAIN_RUN_MAIN"

// Main is a command's TestMain: in a child process that Run started, it
// runs main, which exits; otherwise it runs the tests.
func Main(m *testing.M, main func()) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// Result is what a run of the command wrote and how it exited.
type Result struct {
	Stdout, Stderr string
	Code           int
}

// Output is what the command wrote to stdout, then what it wrote to stderr.
func (r Result) Output() string { return r.Stdout + r.Stderr }

// Run runs the command with args in a child process, the test binary again,
// in which Main runs main. It fails the test if the child cannot be
// started.
func Run(t testing.TB, args ...string) Result {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return Result{Stdout: stdout.String(), Stderr: stderr.String()}
	case errors.As(err, &exit):
		return Result{Stdout: stdout.String(), Stderr: stderr.String(), Code: exit.ExitCode()}
	default:
		t.Fatalf("run %s %q: %v", os.Args[0], args, err)
		return Result{Code: -1}
	}
}

// WriteFile writes content to the file name in dir, for the command to read,
// and returns its path. It fails the test if that fails.
func WriteFile(t testing.TB, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
