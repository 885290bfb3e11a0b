//go:build perf

package perf

import (
	"testing"

	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
	fwk "k8s.io/kube-scheduler/framework"
)

// extensionPointDuration is the scheduler's histogram of extension point
// latencies; scheduler_perf resets it when the measured phase starts and
// takes its percentiles from it when that phase ends.
const extensionPointDuration = "scheduler_framework_extension_point_duration_seconds"

// postFilterCodes are the statuses a PostFilter call is counted under.
var postFilterCodes = []fwk.Code{fwk.Success, fwk.Error, fwk.Unschedulable, fwk.UnschedulableAndUnresolvable}

// reportPostFilterCalls adds to the workload's benchmark line how many
// PostFilter calls the scheduler made since scheduler_perf reset the
// histogram (the measured phase, and the few calls between its end and the
// workload's), how many of them took no longer than the histogram's first
// bucket (0.1 ms), and, for each status the calls returned, their number and
// mean duration in ms.
//
// They explain the percentiles: scheduler_perf interpolates within a bucket,
// so a p50 inside the first bucket is 0.1 ms times 0.5 over the share of
// calls in it, and says how many calls were short, not how long a call took.
func reportPostFilterCalls(b *testing.B) {
	g, err := testutil.GatherMetrics(legacyregistry.DefaultGatherer)
	if err != nil {
		b.Errorf("gathering the scheduler's metrics for the PostFilter calls: %v", err)
		return
	}
	var total, short uint64
	for _, code := range postFilterCodes {
		vec, err := g.GetHistogramVec(extensionPointDuration, map[string]string{"extension_point": "PostFilter", "status": code.String()})
		if err != nil || vec.GetAggregatedSampleCount() == 0 {
			// "not found" or empty: no call returned this status.
			continue
		}
		n := vec.GetAggregatedSampleCount()
		total += n
		for _, h := range vec {
			if len(h.Bucket) > 0 {
				// Buckets come in ascending order of their upper bounds.
				short += h.Bucket[0].GetCumulativeCount()
			}
		}
		b.ReportMetric(float64(n), "postfilter-calls-"+code.String())
		b.ReportMetric(vec.Average()*1000, "postfilter-mean-ms-"+code.String())
	}
	if total == 0 {
		return
	}
	b.ReportMetric(float64(total), "postfilter-calls")
	b.ReportMetric(float64(short), "postfilter-calls-under-0.1ms")
}
