// Package scenario reads sandbox scenario files: a header document of kind
// Scenario (sandbox.budgetguard.io/v1alpha1) with ordered steps, followed by
// standard Kubernetes manifests. docs/scenarios.md documents the format.
package scenario
