package faults

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
)

// Kind is one kind of fault.
type Kind string

// The kinds of fault, in the order they are drawn for a request.
const (
	// DiscoveryError answers a GET of a discovery path (/api, /api/<version>,
	// /apis, /apis/<group>, /apis/<group>/<version>) with 503
	// ServiceUnavailable without reaching the server.
	DiscoveryError Kind = "discovery-error"
	// WatchDisconnect sends a watch request and cuts its response body after
	// a random delay up to Config.MaxWatchLife: reads then return
	// io.ErrUnexpectedEOF and the reflector re-watches.
	WatchDisconnect Kind = "watch-disconnect"
	// WatchExpired answers a watch request with 410 Gone (reason Expired,
	// "too old resource version") without reaching the server: the reflector
	// relists.
	WatchExpired Kind = "watch-expired"
	// ServerError answers a write with 500 or 503 (drawn at random) without
	// reaching the server.
	ServerError Kind = "server-error"
	// TimeoutBefore fails a write with a net.Error whose Timeout() is true;
	// the request never reaches the server.
	TimeoutBefore Kind = "timeout-before"
	// TimeoutAfter sends a write, which the server applies, then discards
	// the response and answers 504 (reason Timeout): the client cannot know
	// the outcome.
	TimeoutAfter Kind = "timeout-after"
	// TooManyRequests answers a write with 429, a Retry-After: 1 header and
	// reason TooManyRequests without reaching the server.
	TooManyRequests Kind = "too-many-requests"
	// Slow delays any request by a random duration up to Config.MaxDelay
	// before sending it.
	Slow Kind = "slow"
)

// kinds lists every Kind in draw order; a Kind's index here indexes counts.
var kinds = [...]Kind{
	DiscoveryError, WatchDisconnect, WatchExpired, ServerError,
	TimeoutBefore, TimeoutAfter, TooManyRequests, Slow,
}

// Kinds returns every Kind in draw order.
func Kinds() []Kind { return slices.Clone(kinds[:]) }

// index returns k's position in kinds, or -1 for an unknown kind.
func (k Kind) index() int { return slices.Index(kinds[:], k) }

// AllKinds returns Rates with every Kind at rate.
func AllKinds(rate float64) map[Kind]float64 {
	m := make(map[Kind]float64, len(kinds))
	for _, k := range kinds {
		m[k] = rate
	}
	return m
}

// ParseRates parses a comma-separated list of kind=rate pairs, such as
// "server-error=0.1,slow=0.5", into Rates; the kind "all" sets every kind
// and later pairs override earlier ones. An empty string gives no rates.
// Kinds and rates are checked by New, not here.
func ParseRates(s string) (map[Kind]float64, error) {
	m := make(map[Kind]float64)
	for pair := range strings.SplitSeq(s, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		name, value, ok := strings.Cut(pair, "=")
		if !ok {
			return nil, fmt.Errorf("fault rate %q: want kind=rate", pair)
		}
		rate, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return nil, fmt.Errorf("fault rate %q: %w", pair, err)
		}
		if name = strings.TrimSpace(name); name == "all" {
			for _, k := range kinds {
				m[k] = rate
			}
			continue
		}
		m[Kind(name)] = rate
	}
	return m, nil
}

// Defaults for the zero durations of a Config.
const (
	DefaultMaxDelay     = 200 * time.Millisecond
	DefaultMaxWatchLife = 5 * time.Second
)

// Config configures an Injector.
type Config struct {
	// Seed seeds the random source (a math/rand/v2 PCG): the same seed and
	// the same sequence of requests give the same faults.
	Seed int64
	// Rates holds the probability, in [0, 1], that an eligible request gets
	// a fault of each kind; a kind absent is off.
	Rates map[Kind]float64
	// MaxDelay bounds the delay of Slow (DefaultMaxDelay if zero).
	MaxDelay time.Duration
	// MaxWatchLife bounds how long a watch stream lives under
	// WatchDisconnect (DefaultMaxWatchLife if zero).
	MaxWatchLife time.Duration
	// StartupDiscoveryErrors is a window after New (or after Arm) in which
	// every discovery request fails with DiscoveryError, whatever its rate.
	StartupDiscoveryErrors time.Duration
}

// Injector injects faults into the requests of the round trippers it makes.
// It is safe for concurrent use.
type Injector struct {
	rates        [len(kinds)]float64
	maxDelay     time.Duration
	maxWatchLife time.Duration
	startup      time.Duration
	now          func() time.Time // the clock; tests replace it

	paused atomic.Bool
	counts [len(kinds)]atomic.Int64

	mu    sync.Mutex // guards rng and armed
	rng   *rand.Rand
	armed time.Time
}

// New returns an Injector for cfg, or an error naming the field of cfg that
// is invalid.
func New(cfg Config) (*Injector, error) {
	i := &Injector{
		maxDelay:     cfg.MaxDelay,
		maxWatchLife: cfg.MaxWatchLife,
		startup:      cfg.StartupDiscoveryErrors,
		now:          time.Now,
		rng:          rand.New(rand.NewPCG(uint64(cfg.Seed), uint64(cfg.Seed)^0x9e3779b97f4a7c15)),
	}
	// Check kinds in a fixed order so the error does not depend on map order.
	names := make([]string, 0, len(cfg.Rates))
	for k := range cfg.Rates {
		names = append(names, string(k))
	}
	slices.Sort(names)
	for _, name := range names {
		k := Kind(name)
		rate := cfg.Rates[k]
		idx := k.index()
		if idx < 0 {
			return nil, fmt.Errorf("config Rates: unknown fault kind %q (known: %s)", name, joinKinds())
		}
		if math.IsNaN(rate) || rate < 0 || rate > 1 {
			return nil, fmt.Errorf("config Rates[%s]: rate %v outside [0, 1]", name, rate)
		}
		i.rates[idx] = rate
	}
	for _, d := range []struct {
		name string
		val  time.Duration
	}{
		{"MaxDelay", cfg.MaxDelay},
		{"MaxWatchLife", cfg.MaxWatchLife},
		{"StartupDiscoveryErrors", cfg.StartupDiscoveryErrors},
	} {
		if d.val < 0 {
			return nil, fmt.Errorf("config %s: negative duration %v", d.name, d.val)
		}
	}
	if i.maxDelay == 0 {
		i.maxDelay = DefaultMaxDelay
	}
	if i.maxWatchLife == 0 {
		i.maxWatchLife = DefaultMaxWatchLife
	}
	i.armed = i.now()
	return i, nil
}

func joinKinds() string {
	names := make([]string, len(kinds))
	for n, k := range kinds {
		names[n] = string(k)
	}
	return strings.Join(names, ", ")
}

// RoundTripper returns a round tripper that sends requests through next,
// injecting faults. A nil next means http.DefaultTransport.
func (i *Injector) RoundTripper(next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return &roundTripper{inj: i, next: next}
}

// WrapConfig returns a copy of cfg whose transport goes through the
// injector. A WrapTransport cfg already had still applies, inside the
// injector's: the injector sees requests after it.
func (i *Injector) WrapConfig(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	inner := c.WrapTransport
	c.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if inner != nil {
			rt = inner(rt)
		}
		return i.RoundTripper(rt)
	}
	return c
}

// Pause stops injecting faults until Resume; requests pass through
// untouched, including discovery requests in the StartupDiscoveryErrors
// window.
func (i *Injector) Pause() { i.paused.Store(true) }

// Resume undoes Pause.
func (i *Injector) Resume() { i.paused.Store(false) }

// Arm restarts the StartupDiscoveryErrors window: discovery requests fail
// for that long from now, as after New. Use it when restarting a component.
func (i *Injector) Arm() {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.armed = i.now()
}

// Counts returns how many faults of each kind have been injected so far;
// every Kind is a key. A fault counts when it is drawn, even if the request
// then fails on its own (a WatchDisconnect whose watch the server refuses).
func (i *Injector) Counts() map[Kind]int {
	m := make(map[Kind]int, len(kinds))
	for n, k := range kinds {
		m[k] = int(i.counts[n].Load())
	}
	return m
}

// String returns the counts on one line, kinds sorted by name, such as
// "discovery-error=3 server-error=7 slow=0 ...".
func (i *Injector) String() string {
	sorted := Kinds()
	slices.Sort(sorted)
	var b strings.Builder
	for n, k := range sorted {
		if n > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%d", k, i.counts[k.index()].Load())
	}
	return b.String()
}

// fault is the decision for one request: a kind and its drawn parameters.
type fault struct {
	kind  Kind
	code  int           // ServerError: 500 or 503
	delay time.Duration // Slow: the delay; WatchDisconnect: the stream's life
}

// decide draws the fault, if any, for a request of class c. It draws only
// for the kinds c is eligible for and that have a positive rate, in draw
// order, and stops at the first hit; the hit's parameters are drawn next.
func (i *Injector) decide(c class) (fault, bool) {
	if i.paused.Load() {
		return fault{}, false
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	if c.discovery && i.startup > 0 && i.now().Sub(i.armed) < i.startup {
		return i.hit(fault{kind: DiscoveryError}), true
	}
	for n, k := range kinds {
		rate := i.rates[n]
		if rate <= 0 || !c.eligible(k) || i.rng.Float64() >= rate {
			continue
		}
		f := fault{kind: k}
		switch k {
		case ServerError:
			f.code = http.StatusInternalServerError
			if i.rng.IntN(2) == 1 {
				f.code = http.StatusServiceUnavailable
			}
		case WatchDisconnect:
			f.delay = time.Duration(i.rng.Int64N(int64(i.maxWatchLife) + 1))
		case Slow:
			f.delay = time.Duration(i.rng.Int64N(int64(i.maxDelay) + 1))
		}
		return i.hit(f), true
	}
	return fault{}, false
}

// hit counts f and returns it.
func (i *Injector) hit(f fault) fault {
	i.counts[f.kind.index()].Add(1)
	return f
}
