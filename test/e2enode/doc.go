//go:build e2enode

// Package e2enode runs against the real node of make e2e-node
// (hack/e2e-node.sh, internal/realnode): budgetguard's release installed
// with helm from its own images, the quick start with real containers, and a
// short multi-actor run judged by the auditor. It needs the node up; the
// build tag keeps it out of make test.
package e2enode
