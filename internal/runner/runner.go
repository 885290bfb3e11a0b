package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	kruiseclientset "github.com/openkruise/kruise-api/client/clientset/versioned"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/budgetguard/budgetguard/internal/audit"
	"github.com/budgetguard/budgetguard/internal/report"
	"github.com/budgetguard/budgetguard/internal/scenario"
	"github.com/budgetguard/budgetguard/manifests"
	"github.com/budgetguard/budgetguard/plugins/budget"
	"github.com/budgetguard/budgetguard/sandbox"
)

// User agents of the runner's own clients. The auditor ignores the runner's
// and the kubelet's requests and attributes the components' by these.
const (
	runnerUserAgent      = "sandbox-runner"
	deschedulerUserAgent = "sandbox-descheduler"
	kubeletUserAgent     = "sandbox-kubelet"
)

// finalSettle is how long Run waits after the last step, so that the
// controllers, the kubelet and the auditor's informers catch up.
const finalSettle = time.Second

// Options configure a run.
type Options struct {
	// Progress receives one line per stage of the run: the control plane
	// coming up, then each step with its outcome and duration. Nil discards
	// them. Progress is written here and never through klog, which the
	// sandbox silences while the control plane runs.
	Progress io.Writer
	// Verbose leaves the logs of etcd, kube-apiserver, the controllers, the
	// scheduler and the descheduler on (klog, to stderr).
	Verbose bool
}

// run is the state of one Run.
type run struct {
	sc       *scenario.Scenario
	mode     report.Mode
	progress io.Writer
	client   kubernetes.Interface
	kruise   kruiseclientset.Interface
	// pubBeta is a client of policy.kruise.io/v1beta1.
	pubBeta rest.Interface
	// deschedulerClient is the descheduler's client; policyPath its
	// checked policy file, which policySource names in errors.
	deschedulerClient kubernetes.Interface
	policyPath        string
	policySource      string
	// pubs: the control plane serves PodUnavailableBudgets.
	pubs  bool
	notes []string
	steps []report.Step
	// refusals collects BudgetAwareEvictor's refusals, loops counts the
	// descheduling loops, events the scheduler's events.
	refusals refusalLog
	loops    int
	events   eventLog
}

func (r *run) printf(format string, args ...any) {
	fmt.Fprintf(r.progress, "[%s] "+format+"\n", append([]any{r.mode}, args...)...)
}

// Run executes sc once in mode on a fresh control plane and returns what the
// auditor saw and what budgetguard's plugins refused. It stops everything it
// started before it returns. A run whose components broke budgets is not an
// error; a scenario step that fails (a wait that times out without
// continueOnTimeout, an object the API server rejects) is, and names the
// step as steps[i].
//
// Only one control plane runs in a process at a time, so runs cannot
// overlap; run the modes one after the other, after Validate.
func Run(ctx context.Context, sc *scenario.Scenario, mode report.Mode, opts Options) (_ report.Run, err error) {
	if sc == nil {
		return report.Run{}, errors.New("runner: no scenario")
	}
	if mode != report.ModeUpstream && mode != report.ModeBudgetguard {
		return report.Run{}, fmt.Errorf("runner: unknown mode %q, want %q or %q", mode, report.ModeUpstream, report.ModeBudgetguard)
	}
	began := time.Now()
	r := &run{sc: sc, mode: mode, progress: opts.Progress}
	if r.progress == nil {
		r.progress = io.Discard
	}
	// Everything started below is stopped in reverse order when Run
	// returns; the first error of a stop is Run's error unless it has one.
	var td teardown
	defer func() { err = td.run(err) }()

	dir, err := os.MkdirTemp("", "budgetguard-run-")
	if err != nil {
		return report.Run{}, fmt.Errorf("create a temporary directory: %w", err)
	}
	td.add(func() error {
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("remove %s: %w", dir, err)
		}
		return nil
	})

	schedCfg, err := r.loadConfig(ctx, dir)
	if err != nil {
		return report.Run{}, err
	}
	cp, logPath, err := r.startControlPlane(ctx, dir, opts.Verbose, &td)
	if err != nil {
		return report.Run{}, err
	}
	before, err := refusalCounts(legacyGatherer)
	if err != nil {
		return report.Run{}, err
	}
	auditor, err := r.startAuditor(ctx, cp, logPath, &td)
	if err != nil {
		return report.Run{}, err
	}
	sched, err := startScheduler(ctx, cp.Config, schedCfg, mode, &r.events)
	if err != nil {
		return report.Run{}, err
	}
	td.add(func() error { sched.stop(); return nil })
	for _, n := range schedCfg.notes {
		r.printf("%s", n)
	}
	r.printf("scheduler up: profiles %s", strings.Join(profileNames(schedCfg), ", "))

	for i, step := range sc.Steps {
		if err := r.step(ctx, i, step); err != nil {
			return report.Run{}, err
		}
	}
	if err := settle(ctx, finalSettle); err != nil {
		return report.Run{}, err
	}

	// Stop the scheduler before the auditor reads the log to its end, so
	// that every request it made is in the log.
	sched.stop()
	result, err := auditor.finish(ctx)
	if err != nil {
		return report.Run{}, err
	}
	after, err := refusalCounts(legacyGatherer)
	if err != nil {
		return report.Run{}, err
	}
	events := r.events.snapshot()
	pods, err := r.pods(ctx, events)
	if err != nil {
		return report.Run{}, err
	}
	records := r.refusals.snapshot()
	out := report.Run{
		Mode:     mode,
		Refusals: pluginRefusals(before, after, records),
		Audit:    result,
		Notes:    r.notes,
		Steps:    r.steps,
		Pods:     pods,
		Timeline: report.Timeline{Budgets: auditor.HealthySeries(), Refusals: timedRefusals(records, events)},
		Duration: time.Since(began),
	}
	r.printf("done in %.1fs: the auditor saw %s, %s, %s and %s", out.Duration.Seconds(), plural(len(result.Disruptions), "disruption"), plural(len(result.Violations), "budget violation"),
		plural(len(result.Races), "race"), plural(len(result.Disagreements), "disagreement"))
	return out, nil
}

// loadConfig reads and checks the scheduler configuration and the
// descheduler policy before any control plane starts, so that a bad file
// fails fast. The policy is checked even when no step deschedules: a
// scenario must not pass with a policy the descheduler would reject. dir is
// the run's scratch directory.
func (r *run) loadConfig(ctx context.Context, dir string) (*schedulerConfig, error) {
	schedSource, schedData, err := readOrShipped(r.sc, r.sc.SchedulerConfig, shippedSchedulerConfig, manifests.SchedulerConfig)
	if err != nil {
		return nil, err
	}
	schedCfg, err := loadSchedulerConfig(klog.FromContext(ctx), dir, schedSource, schedData, r.mode)
	if err != nil {
		return nil, err
	}
	var policyData []byte
	r.policySource, policyData, err = readOrShipped(r.sc, r.sc.DeschedulerPolicy, shippedDeschedulerPolicy, manifests.DeschedulerPolicy)
	if err != nil {
		return nil, err
	}
	if r.policyPath, err = checkPolicy(dir, r.policySource, policyData); err != nil {
		return nil, err
	}
	return schedCfg, nil
}

// startControlPlane starts a sandbox control plane whose kube-apiserver
// writes its audit log under dir, makes it the current one for
// BudgetAwareEvictor and builds the runner's clients. It returns the
// control plane and the audit log's path.
func (r *run) startControlPlane(ctx context.Context, dir string, verbose bool, td *teardown) (*sandbox.ControlPlane, string, error) {
	flags, logPath, err := audit.APIServerFlags(dir)
	if err != nil {
		return nil, "", err
	}
	sbOpts := sandbox.DefaultOptions()
	sbOpts.Verbose = verbose
	sbOpts.APIServerFlags = flags
	// A stand-in for OpenKruise's PUB status controller, so that PUBs get
	// the status budgetguard reads.
	sbOpts.SimulatePUBStatus = true
	// OpenKruise's webhook stands in front of PUB-protected pods unless
	// the scenario runs a cluster without it.
	sbOpts.DisablePUBWebhook = r.sc.DisablePUBWebhook
	r.pubs = sbOpts.InstallPUBCRD
	r.printf("starting the control plane")
	cp, err := sandbox.Start(ctx, sbOpts)
	if err != nil {
		return nil, "", fmt.Errorf("start the control plane: %w", err)
	}
	td.add(func() error {
		if err := cp.Stop(); err != nil {
			return fmt.Errorf("stop the control plane: %w", err)
		}
		return nil
	})
	r.printf("control plane up in %.1fs", cp.StartDuration.Seconds())
	setCurrent(cp)
	td.add(func() error { setCurrent(nil); return nil })
	if err := r.newClients(cp.Config); err != nil {
		return nil, "", err
	}
	return cp, logPath, nil
}

// runAuditor is a started auditor that Run finishes once.
type runAuditor struct {
	*audit.Auditor
	finished bool
}

// finish reads the audit log to its end and returns what the auditor saw.
func (a *runAuditor) finish(ctx context.Context) (audit.Result, error) {
	a.finished = true
	return a.Finish(ctx)
}

// startAuditor starts the independent auditor on the control plane's audit
// log and its own informers. If Run returns before finishing it, the
// teardown finishes it and drops its result.
func (r *run) startAuditor(ctx context.Context, cp *sandbox.ControlPlane, logPath string, td *teardown) (*runAuditor, error) {
	a, err := audit.New(audit.Options{
		Config:  cp.Config,
		LogPath: logPath,
		Components: []audit.ComponentMatch{
			{UserAgentPrefix: schedulerUserAgent, Component: audit.ComponentScheduler},
			{UserAgentPrefix: deschedulerUserAgent, Component: audit.ComponentDescheduler},
		},
		Ignore: []string{kubeletUserAgent, runnerUserAgent},
		PUBs:   r.pubs,
	})
	if err != nil {
		return nil, err
	}
	if err := a.Start(ctx); err != nil {
		return nil, err
	}
	ra := &runAuditor{Auditor: a}
	td.add(func() error {
		if !ra.finished {
			_, _ = ra.Finish(context.WithoutCancel(ctx))
		}
		return nil
	})
	return ra, nil
}

// teardown stops what a run started, last first.
type teardown []func() error

func (td *teardown) add(stop func() error) { *td = append(*td, stop) }

// run calls every stop function, last added first, and returns err, or the
// first stop error when err is nil.
func (td teardown) run(err error) error {
	for i := len(td) - 1; i >= 0; i-- {
		if stopErr := td[i](); stopErr != nil && err == nil {
			err = stopErr
		}
	}
	return err
}

// newClients builds the runner's clients with the runner's user agent.
func (r *run) newClients(config *rest.Config) error {
	cfg := rest.AddUserAgent(rest.CopyConfig(config), runnerUserAgent)
	// Wait steps poll every 200ms; the default 5 QPS would throttle them.
	cfg.QPS, cfg.Burst = 100, 200
	var err error
	if r.client, err = kubernetes.NewForConfig(cfg); err != nil {
		return fmt.Errorf("runner client: %w", err)
	}
	if r.kruise, err = kruiseclientset.NewForConfig(cfg); err != nil {
		return fmt.Errorf("runner kruise client: %w", err)
	}
	if r.pubBeta, err = budget.NewPUBv1beta1Client(cfg); err != nil {
		return fmt.Errorf("runner PodUnavailableBudget v1beta1 client: %w", err)
	}
	dcfg := rest.AddUserAgent(rest.CopyConfig(config), deschedulerUserAgent)
	// The descheduler's loop posts its evictions in bursts.
	dcfg.QPS, dcfg.Burst = 100, 200
	if r.deschedulerClient, err = kubernetes.NewForConfig(dcfg); err != nil {
		return fmt.Errorf("descheduler client: %w", err)
	}
	return nil
}

// step runs steps[i] and writes its progress line.
func (r *run) step(ctx context.Context, i int, step scenario.Step) error {
	began := time.Now()
	name := describeStep(step)
	// Progress lines and notes number steps alike, from 1: "step 3/7".
	number := fmt.Sprintf("step %d/%d", i+1, len(r.sc.Steps))
	line := func(outcome string) {
		r.printf("%s %s: %s (%.1fs)", number, name, outcome, time.Since(began).Seconds())
	}
	outcome, err := r.do(ctx, step)
	r.steps = append(r.steps, report.Step{Number: i + 1, Description: name, Began: began.UTC(), Ended: time.Now().UTC()})
	if err != nil && step.Wait != nil && step.Wait.ContinueOnTimeout && errors.Is(err, errTimedOut) {
		note := fmt.Sprintf("%s %s: %v (continueOnTimeout)", number, name, err)
		r.notes = append(r.notes, note)
		line(err.Error() + ", continuing")
		return nil
	}
	if err != nil {
		line("failed")
		return fmt.Errorf("steps[%d] %s: %w", i, name, err)
	}
	line(outcome)
	return nil
}

// do carries out one step and returns a short outcome.
func (r *run) do(ctx context.Context, step scenario.Step) (string, error) {
	switch {
	case step.Apply != nil:
		return r.apply(ctx, step.Apply.Phase)
	case step.Wait != nil:
		seen, err := r.wait(ctx, step.Wait)
		if err != nil {
			return "", err
		}
		return "ok, " + seen, nil
	case step.SetReadiness != nil:
		return r.setReadiness(ctx, step.SetReadiness)
	case step.Deschedule != nil:
		return r.deschedule(ctx)
	case step.Settle != nil:
		return "ok", settle(ctx, step.Settle.Duration)
	case step.Delete != nil:
		return r.deleteObject(ctx, step.Delete)
	case step.Patch != nil:
		return r.patchObject(ctx, step.Patch)
	case step.StaysPending != nil:
		return r.staysPending(ctx, step.StaysPending)
	}
	return "", errors.New("the step sets no action")
}

// deschedule loads the policy afresh (the descheduler's defaulting writes
// into it) and runs one descheduling loop.
func (r *run) deschedule(ctx context.Context) (string, error) {
	policy, notes, err := loadPolicy(r.policyPath, r.policySource, r.deschedulerClient, r.mode)
	if err != nil {
		return "", err
	}
	for _, n := range notes {
		r.printf("%s", n)
	}
	// BudgetAwareEvictor logs each refusal with the pod and its sentence;
	// the runner reads them from the descheduler's logger.
	r.loops++
	r.refusals.startLoop(r.loops)
	ctx = klog.NewContext(ctx, withRefusalLog(klog.FromContext(ctx), &r.refusals))
	if err := runDescheduler(ctx, r.deschedulerClient, policy); err != nil {
		return "", err
	}
	return "one loop", nil
}

// readOrShipped reads the file at path (which the scenario has resolved
// against its own directory), or returns the shipped manifest when path is
// "".
func readOrShipped(sc *scenario.Scenario, path, shippedName string, shipped []byte) (string, []byte, error) {
	if path == "" {
		return shippedName + " (shipped)", shipped, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", nil, fmt.Errorf("scenario %s: %w", sc.Path, err)
	}
	return path, data, nil
}

func profileNames(cfg *schedulerConfig) []string {
	var names []string
	for _, p := range cfg.config.Profiles {
		names = append(names, p.SchedulerName)
	}
	return names
}
