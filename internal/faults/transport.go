package faults

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// messagePrefix starts the message of every Status the injector answers.
const messagePrefix = "budgetguard fault injector: "

// roundTripper is the http.RoundTripper of an Injector.
type roundTripper struct {
	inj  *Injector
	next http.RoundTripper
}

// WrappedRoundTripper lets client-go's utilnet find the transport beneath
// (it implements k8s.io/apimachinery/pkg/util/net.RoundTripperWrapper).
func (rt *roundTripper) WrappedRoundTripper() http.RoundTripper { return rt.next }

// RoundTrip sends req through next unless the injector decides on a fault.
func (rt *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	f, ok := rt.inj.decide(classify(req))
	if !ok {
		return rt.next.RoundTrip(req)
	}
	msg := messagePrefix + string(f.kind)
	switch f.kind {
	case DiscoveryError:
		closeBody(req)
		return statusResponse(req, http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, msg, nil), nil
	case WatchExpired:
		closeBody(req)
		rv := req.URL.Query().Get("resourceVersion")
		msg = fmt.Sprintf("too old resource version: %s (%s)", rv, msg)
		return statusResponse(req, http.StatusGone, metav1.StatusReasonExpired, msg, nil), nil
	case ServerError:
		closeBody(req)
		reason := metav1.StatusReasonInternalError
		if f.code == http.StatusServiceUnavailable {
			reason = metav1.StatusReasonServiceUnavailable
		}
		return statusResponse(req, f.code, reason, msg, nil), nil
	case TooManyRequests:
		closeBody(req)
		return statusResponse(req, http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests, msg,
			&metav1.StatusDetails{RetryAfterSeconds: 1}), nil
	case TimeoutBefore:
		closeBody(req)
		return nil, timeoutError{}
	case TimeoutAfter:
		resp, err := rt.next.RoundTrip(req)
		if err != nil {
			return nil, err
		}
		discard(resp.Body)
		msg += " (the request reached the server; its outcome is unknown to the client)"
		return statusResponse(req, http.StatusGatewayTimeout, metav1.StatusReasonTimeout, msg, nil), nil
	case WatchDisconnect:
		resp, err := rt.next.RoundTrip(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			return resp, err
		}
		resp.Body = newCutBody(resp.Body, f.delay)
		return resp, nil
	case Slow:
		t := time.NewTimer(f.delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-req.Context().Done():
			closeBody(req)
			return nil, req.Context().Err()
		}
		return rt.next.RoundTrip(req)
	}
	return rt.next.RoundTrip(req)
}

// closeBody closes the body of a request that is not sent, as a
// RoundTripper must.
func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// discard reads a little of body, so its connection may be reused, and
// closes it.
func discard(body io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, 1<<20))
	body.Close()
}

// statusResponse returns a response with code and a JSON metav1.Status body
// of reason and message, as the API server answers failures. details, if not
// nil, is set on the Status; its RetryAfterSeconds also sets the Retry-After
// header.
func statusResponse(req *http.Request, code int, reason metav1.StatusReason, message string, details *metav1.StatusDetails) *http.Response {
	status := metav1.Status{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"},
		Status:   metav1.StatusFailure,
		Message:  message,
		Reason:   reason,
		Details:  details,
		Code:     int32(code),
	}
	body, err := json.Marshal(status)
	if err != nil { // a metav1.Status always marshals
		panic(fmt.Errorf("marshal status: %w", err))
	}
	header := http.Header{"Content-Type": []string{"application/json"}}
	if details != nil && details.RetryAfterSeconds > 0 {
		header.Set("Retry-After", strconv.Itoa(int(details.RetryAfterSeconds)))
	}
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", code, http.StatusText(code)),
		StatusCode:    code,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        header,
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}

// timeoutError is the error of TimeoutBefore: a net.Error that timed out.
// http.Client wraps it in a *url.Error naming the method and URL.
type timeoutError struct{}

func (timeoutError) Error() string { return messagePrefix + string(TimeoutBefore) + ": i/o timeout" }

// Timeout reports true: the error is a timeout.
func (timeoutError) Timeout() bool { return true }

// Temporary reports true; net.Error still requires it.
func (timeoutError) Temporary() bool { return true }

// cutBody is the body of a watch response under WatchDisconnect: after its
// life ends the underlying body is closed and reads return
// io.ErrUnexpectedEOF, as when the connection to the server drops.
type cutBody struct {
	body  io.ReadCloser
	cut   atomic.Bool
	timer *time.Timer
}

func newCutBody(body io.ReadCloser, life time.Duration) *cutBody {
	b := &cutBody{body: body}
	b.timer = time.AfterFunc(life, func() {
		b.cut.Store(true)
		b.body.Close() // unblocks a Read in progress
	})
	return b
}

func (b *cutBody) Read(p []byte) (int, error) {
	if b.cut.Load() {
		return 0, io.ErrUnexpectedEOF
	}
	n, err := b.body.Read(p)
	if err != nil && b.cut.Load() {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

func (b *cutBody) Close() error {
	b.timer.Stop()
	return b.body.Close()
}
