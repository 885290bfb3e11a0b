// Package testenv holds the helpers of tests that run against a real API
// server (the sandbox's in-process control plane): a namespace per test,
// nodes the simulated kubelet makes Ready, objects created with the test's
// failure handling, and the wait-for and holds-for conditions the tests
// poll. The objects themselves are built with package testobj.
//
// It is an ordinary package, not a _test one, so that test/integration,
// test/scenarios and the audit package's control-plane tests share it.
package testenv
