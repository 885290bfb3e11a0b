package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
)

// requestKind says what a logged request is.
type requestKind int

const (
	// podDisruption: a pod delete or a pods/eviction create.
	podDisruption requestKind = iota
	// pubStatusWrite: an update of a PodUnavailableBudget or its status;
	// pod names the PUB, recorded the pods its body's
	// status.disruptedPods holds (all of them when wholeStatus).
	pubStatusWrite
	// podCollection: a deletecollection of pods in namespace (it explains
	// a pod that goes, never a disruption of its own).
	podCollection
)

// request is one pod delete or pods/eviction create from the audit log (or
// one of the other kinds of requestKind).
type request struct {
	kind     requestKind
	recorded []string
	// recordedAt holds the time each recorded pod's disruptedPods entry
	// carries, where it parses.
	recordedAt map[string]time.Time
	// wholeStatus: a pubStatusWrite that replaces the status whole (an
	// update of the status subresource), so a pod absent from recorded
	// is not in disruptedPods once it is answered.
	wholeStatus bool
	line        int       // 1-based, counted from where the auditor started reading
	received    time.Time // requestReceivedTimestamp
	answered    time.Time // stageTimestamp of ResponseComplete: at or after received
	userAgent   string
	action      Action
	namespace   string
	pod         string
	code        int
	message     string
	dryRun      bool
}

// logReader reads complete lines of the audit log from an offset on. It
// keeps an incomplete last line until the rest of it is written.
type logReader struct {
	path    string
	f       *os.File
	line    int
	partial []byte
	buf     []byte
}

// openLog opens path and positions the reader at its current end, so that
// only events written from now on are read.
func openLog(path string) (*logReader, error) {
	if path == "" {
		return nil, errors.New("audit: Options.LogPath is empty; pass the path APIServerFlags returned")
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("audit: open audit log (does kube-apiserver run with the flags of APIServerFlags?): %w", err)
	}
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("audit: seek to the end of audit log %s: %w", path, err)
	}
	return &logReader{path: path, f: f, buf: make([]byte, 64*1024)}, nil
}

// read reads what has been written since the last call and returns the
// requests of interest in its complete lines.
func (r *logReader) read() ([]request, error) {
	var out []request
	for {
		n, err := r.f.Read(r.buf)
		if n > 0 {
			data := append(r.partial, r.buf[:n]...)
			for {
				i := bytes.IndexByte(data, '\n')
				if i < 0 {
					break
				}
				r.line++
				req, ok, perr := parseLine(data[:i])
				if perr != nil {
					return out, fmt.Errorf("audit: %s, line %d after the start of the audit: %w", r.path, r.line, perr)
				}
				if ok {
					req.line = r.line
					out = append(out, req)
				}
				data = data[i+1:]
			}
			r.partial = append(r.partial[:0:0], data...)
		}
		if errors.Is(err, io.EOF) || (err == nil && n == 0) {
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("audit: read %s: %w", r.path, err)
		}
	}
}

func (r *logReader) close() error { return r.f.Close() }

// parseLine decodes one JSON line. It returns ok=false for events that are
// not a final stage of a pod delete or a pods/eviction create.
func parseLine(line []byte) (request, bool, error) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return request{}, false, nil
	}
	var ev auditv1.Event
	if err := json.Unmarshal(line, &ev); err != nil {
		return request{}, false, fmt.Errorf("not a JSON audit.k8s.io/v1 Event: %w", err)
	}
	if ev.Stage != auditv1.StageResponseComplete && ev.Stage != auditv1.StagePanic {
		return request{}, false, nil
	}
	ref := ev.ObjectRef
	if ref == nil {
		return request{}, false, nil
	}
	switch {
	case ref.APIGroup == pubGroup && ref.Resource == "podunavailablebudgets" && ref.Name != "" &&
		(ev.Verb == "update" || ev.Verb == "patch") && (ref.Subresource == "" || ref.Subresource == "status"):
		return parsePUBWrite(&ev)
	case ref.APIGroup == "" && ref.Resource == "pods" && ref.Name == "" && ev.Verb == "deletecollection":
		req := request{kind: podCollection, received: ev.RequestReceivedTimestamp.Time, answered: ev.StageTimestamp.Time, userAgent: ev.UserAgent, namespace: ref.Namespace}
		if ev.ResponseStatus != nil {
			req.code = int(ev.ResponseStatus.Code)
		}
		return req, true, nil
	}
	if ref.APIGroup != "" || ref.Resource != "pods" || ref.Name == "" {
		return request{}, false, nil
	}
	var action Action
	switch {
	case ev.Verb == "delete" && ref.Subresource == "":
		action = ActionDelete
	case ev.Verb == "create" && ref.Subresource == "eviction":
		action = ActionEvict
	default:
		return request{}, false, nil
	}
	req := request{
		received:  ev.RequestReceivedTimestamp.Time,
		answered:  ev.StageTimestamp.Time,
		userAgent: ev.UserAgent,
		action:    action,
		namespace: ref.Namespace,
		pod:       ref.Name,
	}
	if req.answered.Before(req.received) {
		req.answered = req.received
	}
	if ev.ResponseStatus != nil {
		req.code = int(ev.ResponseStatus.Code)
		req.message = ev.ResponseStatus.Message
	}
	if req.code == 0 {
		return request{}, false, fmt.Errorf("%s of pod %s/%s (audit ID %s) has no response code", action, ref.Namespace, ref.Name, ev.AuditID)
	}
	dry, err := isDryRun(ev.RequestURI, ev.RequestObject, action)
	if err != nil {
		return request{}, false, fmt.Errorf("%s of pod %s/%s (audit ID %s): %w", action, ref.Namespace, ref.Name, ev.AuditID, err)
	}
	req.dryRun = dry
	return req, true, nil
}

// isDryRun reports whether the request asked for dryRun, in its query or in
// its body (DeleteOptions for a delete, Eviction.deleteOptions for an
// eviction).
func isDryRun(uri string, body *runtime.Unknown, action Action) (bool, error) {
	if u, err := url.ParseRequestURI(uri); err == nil && len(u.Query()["dryRun"]) > 0 {
		return true, nil
	}
	if body == nil || len(body.Raw) == 0 {
		return false, nil
	}
	raw := body.Raw
	var opts struct {
		DryRun        []string `json:"dryRun"`
		DeleteOptions *struct {
			DryRun []string `json:"dryRun"`
		} `json:"deleteOptions"`
	}
	if err := json.Unmarshal(raw, &opts); err != nil {
		return false, fmt.Errorf("request object is not JSON: %w", err)
	}
	if action == ActionEvict {
		return opts.DeleteOptions != nil && len(opts.DeleteOptions.DryRun) > 0, nil
	}
	return len(opts.DryRun) > 0, nil
}

// pubGroup is OpenKruise's API group of PodUnavailableBudgets.
const pubGroup = "policy.kruise.io"

// parsePUBWrite reads an update or patch of a PUB (or its status): who
// wrote, when, whether the API server took it, and which pods the body's
// status.disruptedPods holds (a record of a disruption decided, as
// OpenKruise's webhook writes it).
func parsePUBWrite(ev *auditv1.Event) (request, bool, error) {
	req := request{
		kind:      pubStatusWrite,
		received:  ev.RequestReceivedTimestamp.Time,
		answered:  ev.StageTimestamp.Time,
		userAgent: ev.UserAgent,
		namespace: ev.ObjectRef.Namespace,
		pod:       ev.ObjectRef.Name,
	}
	if req.answered.Before(req.received) {
		req.answered = req.received
	}
	if ev.ResponseStatus != nil {
		req.code = int(ev.ResponseStatus.Code)
	}
	if ev.RequestObject == nil || len(ev.RequestObject.Raw) == 0 {
		return req, true, nil
	}
	if u, err := url.ParseRequestURI(ev.RequestURI); err == nil && len(u.Query()["dryRun"]) > 0 {
		req.dryRun = true
	}
	req.wholeStatus = ev.Verb == "update" && ev.ObjectRef.Subresource == "status"
	var body struct {
		Status struct {
			DisruptedPods map[string]json.RawMessage `json:"disruptedPods"`
		} `json:"status"`
	}
	if err := json.Unmarshal(ev.RequestObject.Raw, &body); err != nil {
		return request{}, false, fmt.Errorf("%s of podunavailablebudget %s/%s (audit ID %s): request object is not JSON: %w", ev.Verb, req.namespace, req.pod, ev.AuditID, err)
	}
	for name, raw := range body.Status.DisruptedPods {
		req.recorded = append(req.recorded, name)
		var at metav1.Time
		if err := json.Unmarshal(raw, &at); err == nil && !at.IsZero() {
			if req.recordedAt == nil {
				req.recordedAt = map[string]time.Time{}
			}
			req.recordedAt[name] = at.Time
		}
	}
	slices.Sort(req.recorded)
	return req, true, nil
}
