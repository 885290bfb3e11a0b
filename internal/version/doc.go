// Package version says which budgetguard this is and which Kubernetes and
// descheduler it embeds. The budgetguard version is set at build time
// (make build passes -ldflags "-X .../internal/version.gitVersion=$(git
// describe)"); a binary built otherwise reports the VCS revision Go stamped
// into it, or v0.0.0-dev. The embedded versions come from the module
// versions compiled in. Every binary prints Get on --version, and
// RegisterMetrics exports it as budgetguard_build_info.
package version
