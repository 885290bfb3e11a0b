// Package version says which budgetguard this is and which Kubernetes and
// descheduler it embeds. The budgetguard version is set at build time from
// hack/version.sh (make passes -ldflags from hack/ldflags.sh); a binary built
// otherwise reports the release in VERSION with -dev.g<the VCS revision Go
// stamped into it>, or -dev. The embedded versions come from the module
// versions compiled in. Every binary prints Get on --version, and
// RegisterMetrics exports it as budgetguard_build_info.
package version
