package suggest

import "testing"

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"", "abc", 3},
		{"abc", "", 3},
		{"RemoveDuplicats", "RemoveDuplicates", 1},
		{"BudgetAwareEvicter", "BudgetAwareEvictor", 1},
		{"kitten", "sitting", 3},
	} {
		if got := EditDistance(tc.a, tc.b); got != tc.want {
			t.Errorf("EditDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestClosest(t *testing.T) {
	plugins := []string{"DefaultEvictor", "BudgetAwareEvictor", "RemoveDuplicates", "LowNodeUtilization", "HighNodeUtilization"}
	for _, tc := range []struct {
		name, want string
		ok         bool
	}{
		{"RemoveDuplicats", "RemoveDuplicates", true},
		{"BudgetAwareEvicter", "BudgetAwareEvictor", true},
		{"removeduplicates", "RemoveDuplicates", true},
		{"DefaultEvicter", "DefaultEvictor", true},
		{"Shuffle", "", false},
		{"HighNodeUtilisation", "HighNodeUtilization", true},
		{"Descheduler", "", false},
	} {
		got, ok := Closest(tc.name, plugins)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Closest(%q) = %q, %v; want %q, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
	if got, ok := Closest("x", nil); ok || got != "" {
		t.Errorf("Closest with no candidates = %q, %v", got, ok)
	}
}
