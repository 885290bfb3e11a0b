package main

import (
	"math"
	"sort"
)

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func minMax(xs []float64) (float64, float64) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, x := range xs {
		lo = math.Min(lo, x)
		hi = math.Max(hi, x)
	}
	return lo, hi
}

// binomCDF is P(X <= k) for X ~ Binomial(n, 1/2).
func binomCDF(k, n int) float64 {
	if k < 0 {
		return 0
	}
	sum, c := 0.0, 1.0 // c = C(n, i)
	for i := 0; i <= k && i <= n; i++ {
		if i > 0 {
			c = c * float64(n-i+1) / float64(i)
		}
		sum += c
	}
	return sum / math.Pow(2, float64(n))
}

// medianInterval is the distribution-free confidence interval of the median
// at level conf: the k-th smallest and the k-th largest of xs, for the
// largest k whose interval still covers the median with probability conf
// (the sign test's order statistics: coverage 1 - 2 P(X <= k-1), X ~
// Binomial(n, 1/2)). ok is false when even the smallest and the largest do
// not reach conf: below 6 samples at 95 %.
func medianInterval(xs []float64, conf float64) (lo, hi float64, ok bool) {
	n := len(xs)
	k := 0
	for j := 1; j <= n/2; j++ {
		if 1-2*binomCDF(j-1, n) >= conf {
			k = j
		} else {
			break
		}
	}
	if k == 0 {
		return 0, 0, false
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[k-1], s[n-k], true
}

// minSamplesForInterval is the smallest number of samples medianInterval
// gives an interval for at level conf.
func minSamplesForInterval(conf float64) int {
	for n := 1; n < 1000; n++ {
		if _, _, ok := medianInterval(make([]float64, n), conf); ok {
			return n
		}
	}
	return 1000
}
