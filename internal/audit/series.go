package audit

import (
	"slices"
	"time"
)

// This file is a read-only export: each budget's healthy count over the
// run, as the replay (replay.go) counted it for the budgets' summaries
// (track). It keeps what the replay computed; it decides nothing, and
// nothing the auditor decides (disruptions, violations, races,
// disagreements, the summaries) reads it. The sandbox's HTML timeline
// draws it.

// HealthyPoint is a budget's healthy count from At on, until the next
// point of its series: the count the replay keeps for BudgetSummary (pods
// its controller counts healthy, less those the audit log shows
// disrupted), and the budget's desired count then.
type HealthyPoint struct {
	At      time.Time
	Healthy int32
	Desired int32
	// Met: the budget had been met by then (see BudgetSummary.Met); its
	// LowestHealthy is the lowest Healthy of the points that are.
	Met bool
	// Gone: the budget was deleted at At; Healthy and Desired are those of
	// the point before. A later point is the budget created again.
	Gone bool
}

// BudgetSeries is one budget's healthy count over the run, in time order;
// two points never share a time and consecutive points differ.
type BudgetSeries struct {
	Budget BudgetRef
	Points []HealthyPoint
}

// HealthySeries returns each budget's healthy count over the run, sorted by
// budget like Result.Budgets, once Finish has returned (nil before). It
// reads what Finish's replay recorded and changes nothing; the result is
// the caller's own copy.
func (a *Auditor) HealthySeries() []BudgetSeries {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.series == nil {
		return nil
	}
	out := make([]BudgetSeries, 0, len(a.series))
	for _, s := range a.series {
		out = append(out, BudgetSeries{Budget: s.Budget, Points: slices.Clone(s.Points)})
	}
	return out
}

// seriesRecorder keeps the replay's counts; the replayer holds one.
type seriesRecorder struct {
	// now is the time of what the replay is taking in: the step, or the
	// effect of a disruption.
	now    time.Time
	points map[BudgetRef][]HealthyPoint
}

// record keeps healthy as b's count at now, with b's state after track
// updated it. A point at the same time as the last one replaces it (the
// count after that instant); a point that changes nothing is dropped.
func (s *seriesRecorder) record(b *budgetState, healthy int32) {
	s.add(b.ref, HealthyPoint{At: s.now, Healthy: healthy, Desired: b.desired, Met: b.met})
}

// gone records that b was deleted at now.
func (s *seriesRecorder) gone(ref BudgetRef) {
	pts := s.points[ref]
	if len(pts) == 0 || pts[len(pts)-1].Gone {
		return
	}
	last := pts[len(pts)-1]
	s.add(ref, HealthyPoint{At: s.now, Healthy: last.Healthy, Desired: last.Desired, Met: last.Met, Gone: true})
}

func (s *seriesRecorder) add(ref BudgetRef, p HealthyPoint) {
	if s.points == nil {
		s.points = map[BudgetRef][]HealthyPoint{}
	}
	pts := s.points[ref]
	if n := len(pts); n > 0 && pts[n-1].At.Equal(p.At) {
		pts = pts[:n-1] // the count after that instant
	}
	if n := len(pts); n > 0 && sameCounts(pts[n-1], p) {
		s.points[ref] = pts // no change
		return
	}
	s.points[ref] = append(pts, p)
}

// sameCounts reports whether a and b differ in nothing but their time.
func sameCounts(a, b HealthyPoint) bool {
	return a.Healthy == b.Healthy && a.Desired == b.Desired && a.Met == b.Met && a.Gone == b.Gone
}

// series returns the recorded series, sorted by budget.
func (s *seriesRecorder) series() []BudgetSeries {
	out := make([]BudgetSeries, 0, len(s.points))
	for ref, pts := range s.points {
		out = append(out, BudgetSeries{Budget: ref, Points: pts})
	}
	slices.SortFunc(out, func(a, b BudgetSeries) int { return compareRefs(a.Budget, b.Budget) })
	return out
}
