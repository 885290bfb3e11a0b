// Package suggest finds the name a misspelt one was meant to be, for the
// configuration checks of the scheduler and the descheduler: a plugin name
// that no registry knows is far easier to fix with "did you mean
// BudgetAwareEvictor?" than with the list of every plugin.
package suggest

import "strings"

// Closest returns the candidate closest to name, ignoring case, when it is
// a likely misspelling of it: at most a third of name's length away in
// edits (at least 2), so that "RemoveDuplicats" and "BudgetAwareEvicter"
// (1 away) find their plugin and an unrelated name of similar length finds
// none. Ties go to the earlier candidate.
func Closest(name string, candidates []string) (string, bool) {
	best, bestDist := "", -1
	for _, c := range candidates {
		d := EditDistance(strings.ToLower(name), strings.ToLower(c))
		if bestDist < 0 || d < bestDist {
			best, bestDist = c, d
		}
	}
	if bestDist < 0 || bestDist > max(2, len(name)/3) {
		return "", false
	}
	return best, true
}

// EditDistance is the Levenshtein distance between a and b, counted in
// bytes: the names compared are ASCII.
func EditDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
