package testenv

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
)

// EvictionCounter is an http.RoundTripper, put on a client with
// rest.Config.Wrap, that counts the Eviction API's answers by status and
// pod. It strips Retry-After from 429s, so client-go's typed Evict does not
// silently retry them (up to 10 times, 10 s apart) and each refused
// eviction is counted once, as the first attempt's answer. It can fail the
// first eviction requests with a 500 without sending them (FailFirst).
type EvictionCounter struct {
	next http.RoundTripper

	mu       sync.Mutex
	byStatus map[int]int
	pods     map[int][]string
	failNext int
	injected int
}

// NewEvictionCounter returns a counter whose first failFirst eviction
// requests are answered 500 here, as if the API server had failed them.
func NewEvictionCounter(failFirst int) *EvictionCounter {
	return &EvictionCounter{byStatus: map[int]int{}, pods: map[int][]string{}, failNext: failFirst}
}

// Wrap makes the counter the RoundTripper in front of rt; pass it to
// rest.Config.Wrap.
func (c *EvictionCounter) Wrap(rt http.RoundTripper) http.RoundTripper {
	c.next = rt
	return c
}

func isEviction(req *http.Request) bool {
	return req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/eviction")
}

// RoundTrip implements http.RoundTripper.
func (c *EvictionCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	if isEviction(req) {
		c.mu.Lock()
		fail := c.failNext > 0
		if fail {
			c.failNext--
			c.injected++
		}
		c.mu.Unlock()
		if fail {
			body := `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"injected failure","reason":"InternalError","code":500}`
			return &http.Response{
				StatusCode: http.StatusInternalServerError,
				Status:     "500 Internal Server Error",
				Header:     http.Header{"Content-Type": []string{"application/json"}},
				Body:       io.NopCloser(strings.NewReader(body)),
				Request:    req,
				ProtoMajor: 1, ProtoMinor: 1,
			}, nil
		}
	}
	resp, err := c.next.RoundTrip(req)
	if err != nil || !isEviction(req) {
		return resp, err
	}
	parts := strings.Split(req.URL.Path, "/")
	pod := parts[len(parts)-2]
	c.mu.Lock()
	c.byStatus[resp.StatusCode]++
	c.pods[resp.StatusCode] = append(c.pods[resp.StatusCode], pod)
	c.mu.Unlock()
	if resp.StatusCode == http.StatusTooManyRequests {
		resp.Header.Del("Retry-After")
	}
	return resp, nil
}

// Count is the number of answers with status.
func (c *EvictionCounter) Count(status int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byStatus[status]
}

// Total is the number of answers.
func (c *EvictionCounter) Total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.byStatus {
		n += v
	}
	return n
}

// Evicted names the pods whose eviction was answered 201.
func (c *EvictionCounter) Evicted() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.pods[http.StatusCreated]...)
}

// Injected is the number of requests failed here (see NewEvictionCounter).
func (c *EvictionCounter) Injected() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.injected
}

// String is the answers by status.
func (c *EvictionCounter) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprint(c.byStatus)
}
