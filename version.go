// Package budgetguard holds the one source of budgetguard's version: the file
// VERSION beside it, the release being prepared (hack/version.sh turns it
// into a build's version; internal/version reports it).
package budgetguard

import (
	_ "embed"
	"strings"
)

//go:embed VERSION
var release string

// Release is the release being prepared, e.g. v0.1.0: a commit tagged with
// it is that release, and any other commit is v0.1.0-dev.g<commit>.
func Release() string { return strings.TrimSpace(release) }
