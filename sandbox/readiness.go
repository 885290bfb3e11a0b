package sandbox

import (
	"fmt"
	"strings"
	"time"
)

// ReadinessAnnotation on a Pod tells the simulated kubelet how the pod's
// readiness behaves. The values are ReadinessReady, ReadinessNever,
// ReadinessAfter(d) and ReadinessCrashLoop; see the package documentation.
// The kubelet follows changes of the annotation on a live pod.
const ReadinessAnnotation = "sandbox.budgetguard.io/readiness"

const (
	// ReadinessReady makes the pod Running and Ready, as if it had no
	// annotation.
	ReadinessReady = "ready"
	// ReadinessNever makes the pod Running but never Ready.
	ReadinessNever = "never"
	// ReadinessCrashLoop makes the pod Running but never Ready, with its
	// containers waiting in CrashLoopBackOff and their restartCount rising
	// every Options.CrashLoopInterval.
	ReadinessCrashLoop = "crashloop"
	// ReadinessAfterPrefix starts a value "after=<duration>", for example
	// "after=5s": the pod is Running, and Ready once that long has passed
	// since the kubelet first saw the value on the pod. Use ReadinessAfter
	// to build it.
	ReadinessAfterPrefix = "after="
)

// ReadinessAfter returns the annotation value that makes a pod Ready d after
// the kubelet first sees it.
func ReadinessAfter(d time.Duration) string {
	return ReadinessAfterPrefix + d.String()
}

// readinessKind is how the kubelet runs a pod.
type readinessKind int

const (
	kindReady readinessKind = iota
	kindNever
	kindAfter
	kindCrashLoop
)

// readinessMode is a parsed ReadinessAnnotation value.
type readinessMode struct {
	kind  readinessKind
	after time.Duration
}

// parseReadiness parses the value of ReadinessAnnotation. An empty value means
// ReadinessReady. For an invalid value it returns kindNever and an error that
// says what would be valid.
func parseReadiness(value string) (readinessMode, error) {
	switch v := strings.TrimSpace(value); v {
	case "", ReadinessReady:
		return readinessMode{kind: kindReady}, nil
	case ReadinessNever:
		return readinessMode{kind: kindNever}, nil
	case ReadinessCrashLoop:
		return readinessMode{kind: kindCrashLoop}, nil
	default:
		if rest, ok := strings.CutPrefix(v, ReadinessAfterPrefix); ok {
			d, err := time.ParseDuration(rest)
			if err == nil && d >= 0 {
				return readinessMode{kind: kindAfter, after: d}, nil
			}
		}
	}
	return readinessMode{kind: kindNever}, fmt.Errorf("annotation %s: invalid value %q, want %q, %q, %q, or %q followed by a non-negative duration such as 5s",
		ReadinessAnnotation, value, ReadinessReady, ReadinessNever, ReadinessCrashLoop, ReadinessAfterPrefix)
}
