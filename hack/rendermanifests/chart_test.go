package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/strvals"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// loadChart loads charts/budgetguard from the repository this file is in.
func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	ch, err := loader.Load(filepath.Join(filepath.Dir(file), "..", "..", "charts", "budgetguard"))
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// chartRender is one rendering of the chart: its objects by kind and name,
// and its NOTES.txt.
type chartRender struct {
	objects map[string][]byte // "Kind name" -> the document
	notes   string
}

// renderSet renders ch as `helm template budgetguard CHART -n kube-system
// --set s...` does, values checked against values.schema.json included.
func renderSet(ch *chart.Chart, set ...string) (*chartRender, error) {
	values := map[string]any{}
	for _, s := range set {
		if err := strvals.ParseInto(s, values); err != nil {
			return nil, fmt.Errorf("--set %s: %w", s, err)
		}
	}
	rendered, err := render(ch, values)
	if err != nil {
		return nil, err
	}
	out := &chartRender{objects: map[string][]byte{}}
	for name, content := range rendered {
		if strings.HasSuffix(name, "NOTES.txt") {
			out.notes = content
			continue
		}
		for _, doc := range strings.Split(content, "\n---") {
			var head struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}
			if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			if head.Kind == "" {
				continue
			}
			key := head.Kind + " " + head.Metadata.Name
			if _, dup := out.objects[key]; dup {
				return nil, fmt.Errorf("%s rendered twice", key)
			}
			out.objects[key] = []byte(doc)
		}
	}
	return out, nil
}

// mustRender is renderSet that fails the test on an error.
func mustRender(t *testing.T, ch *chart.Chart, set ...string) *chartRender {
	t.Helper()
	r, err := renderSet(ch, set...)
	if err != nil {
		t.Fatalf("render with %v: %v", set, err)
	}
	return r
}

// has reports whether the rendering holds the object kind/name.
func (r *chartRender) has(kind, name string) bool {
	_, ok := r.objects[kind+" "+name]
	return ok
}

// names returns the names of the rendered objects of kind, sorted.
func (r *chartRender) names(kind string) []string {
	var names []string
	for key := range r.objects {
		if k, name, _ := strings.Cut(key, " "); k == kind {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// get decodes the object kind/name into out, strictly.
func (r *chartRender) get(t *testing.T, kind, name string, out any) {
	t.Helper()
	doc, ok := r.objects[kind+" "+name]
	if !ok {
		t.Fatalf("the chart rendered no %s %s; it rendered %v", kind, name, slices.Sorted(maps.Keys(r.objects)))
	}
	if err := yaml.UnmarshalStrict(doc, out); err != nil {
		t.Fatalf("%s %s: %v", kind, name, err)
	}
}

// podSpecs returns the pod spec of every rendered Deployment and CronJob,
// by "Kind name".
func (r *chartRender) podSpecs(t *testing.T) map[string]corev1.PodSpec {
	t.Helper()
	specs := map[string]corev1.PodSpec{}
	for _, name := range r.names("Deployment") {
		var d appsv1.Deployment
		r.get(t, "Deployment", name, &d)
		specs["Deployment "+name] = d.Spec.Template.Spec
	}
	for _, name := range r.names("CronJob") {
		var c batchv1.CronJob
		r.get(t, "CronJob", name, &c)
		specs["CronJob "+name] = c.Spec.JobTemplate.Spec.Template.Spec
	}
	return specs
}

// bindingSubjects returns the ServiceAccount subjects ("namespace/name") of
// every rendered ClusterRoleBinding and RoleBinding.
func (r *chartRender) bindingSubjects(t *testing.T) []string {
	t.Helper()
	var subjects []string
	for _, kind := range []string{"ClusterRoleBinding", "RoleBinding"} {
		for _, name := range r.names(kind) {
			var b struct {
				Subjects []struct {
					Kind      string `json:"kind"`
					Name      string `json:"name"`
					Namespace string `json:"namespace"`
				} `json:"subjects"`
			}
			if err := yaml.Unmarshal(r.objects[kind+" "+name], &b); err != nil {
				t.Fatalf("%s %s: %v", kind, name, err)
			}
			for _, s := range b.Subjects {
				if s.Kind == "ServiceAccount" {
					subjects = append(subjects, s.Namespace+"/"+s.Name)
				}
			}
		}
	}
	return subjects
}

// TestServiceAccounts: whether the chart creates a component's
// ServiceAccount is serviceAccount.create, not rbac.create. Every pod runs as
// a ServiceAccount the rendering holds, or, where the chart is told not to
// create it, one that NOTES.txt says must exist; every binding names the
// ServiceAccount the pods run as.
func TestServiceAccounts(t *testing.T) {
	ch := loadChart(t)
	for _, tc := range []struct {
		name string
		set  []string
		// The ServiceAccount each workload runs as, and whether the chart creates it.
		want    map[string]string
		created bool
		rbac    bool
	}{
		{
			name:    "defaults",
			want:    map[string]string{"Deployment budgetguard-scheduler": "budgetguard-scheduler", "Deployment budgetguard-descheduler": "budgetguard-descheduler"},
			created: true, rbac: true,
		},
		{
			name:    "rbac.create=false keeps the ServiceAccounts",
			set:     []string{"rbac.create=false"},
			want:    map[string]string{"Deployment budgetguard-scheduler": "budgetguard-scheduler", "Deployment budgetguard-descheduler": "budgetguard-descheduler"},
			created: true,
		},
		{
			name: "serviceAccount.create=false without a name: the default names, bound",
			set:  []string{"scheduler.serviceAccount.create=false", "descheduler.serviceAccount.create=false"},
			want: map[string]string{"Deployment budgetguard-scheduler": "budgetguard-scheduler", "Deployment budgetguard-descheduler": "budgetguard-descheduler"},
			rbac: true,
		},
		{
			name: "serviceAccount.create=false with names, no RBAC, the descheduler a CronJob",
			set: []string{"rbac.create=false", "descheduler.kind=CronJob",
				"scheduler.serviceAccount.create=false", "scheduler.serviceAccount.name=ops-scheduler",
				"descheduler.serviceAccount.create=false", "descheduler.serviceAccount.name=ops-descheduler"},
			want: map[string]string{"Deployment budgetguard-scheduler": "ops-scheduler", "CronJob budgetguard-descheduler": "ops-descheduler"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := mustRender(t, ch, tc.set...)
			specs := r.podSpecs(t)
			if len(specs) != len(tc.want) {
				t.Errorf("workloads %v, want %v", slices.Sorted(maps.Keys(specs)), tc.want)
			}
			var wantSubjects []string
			for workload, sa := range tc.want {
				spec, ok := specs[workload]
				if !ok {
					t.Errorf("no %s rendered", workload)
					continue
				}
				if spec.ServiceAccountName != sa {
					t.Errorf("%s runs as ServiceAccount %q, want %q", workload, spec.ServiceAccountName, sa)
				}
				if got := r.has("ServiceAccount", sa); got != tc.created {
					t.Errorf("ServiceAccount %s rendered: %v, want %v", sa, got, tc.created)
				}
				mustExist := "ServiceAccount kube-system/" + sa + "\n"
				if got := strings.Contains(r.notes, mustExist); got == tc.created {
					t.Errorf("NOTES.txt names %s as one that must exist: %v, want %v:\n%s", sa, got, !tc.created, r.notes)
				}
				wantSubjects = append(wantSubjects, "kube-system/"+sa)
			}
			if tc.created && len(r.names("ServiceAccount")) != len(tc.want) {
				t.Errorf("ServiceAccounts %v, want one per workload: %v", r.names("ServiceAccount"), tc.want)
			}
			subjects := r.bindingSubjects(t)
			if !tc.rbac {
				if len(subjects) != 0 || len(r.names("ClusterRole")) != 0 || len(r.names("Role")) != 0 {
					t.Errorf("rbac.create=false rendered roles or bindings: %v %v %v", r.names("ClusterRole"), r.names("Role"), subjects)
				}
				if !strings.Contains(r.notes, "rbac.create=false") {
					t.Errorf("NOTES.txt does not say the chart creates no RBAC:\n%s", r.notes)
				}
				return
			}
			for _, s := range subjects {
				if !slices.Contains(wantSubjects, s) {
					t.Errorf("a binding names ServiceAccount %s, which no workload runs as (%v)", s, wantSubjects)
				}
			}
			for _, s := range wantSubjects {
				if !slices.Contains(subjects, s) {
					t.Errorf("no binding names ServiceAccount %s", s)
				}
			}
		})
	}
}

// TestImageTag: the default tag is the chart's appVersion with one leading
// "v", whether appVersion has one or not; a tag given is used as it is.
func TestImageTag(t *testing.T) {
	for _, tc := range []struct {
		appVersion string
		set        []string
		scheduler  string
	}{
		{appVersion: "0.1.0", scheduler: "ghcr.io/budgetguard/scheduler:v0.1.0"},
		{appVersion: "v0.1.0", scheduler: "ghcr.io/budgetguard/scheduler:v0.1.0"},
		{appVersion: "v0.1.0", set: []string{"scheduler.image.tag=0.2.0-rc.1"}, scheduler: "ghcr.io/budgetguard/scheduler:0.2.0-rc.1"},
	} {
		t.Run(tc.appVersion+" "+strings.Join(tc.set, " "), func(t *testing.T) {
			ch := loadChart(t)
			ch.Metadata.AppVersion = tc.appVersion
			specs := mustRender(t, ch, tc.set...).podSpecs(t)
			for workload, want := range map[string]string{
				"Deployment budgetguard-scheduler":   tc.scheduler,
				"Deployment budgetguard-descheduler": "ghcr.io/budgetguard/descheduler:v0.1.0",
			} {
				if got := specs[workload].Containers[0].Image; got != want {
					t.Errorf("%s: image %q, want %q", workload, got, want)
				}
			}
		})
	}
}

// schedulerLeaderElection returns the leaderElection of the rendered
// KubeSchedulerConfiguration.
func (r *chartRender) schedulerLeaderElection(t *testing.T) map[string]any {
	t.Helper()
	var cm corev1.ConfigMap
	r.get(t, "ConfigMap", "budgetguard-scheduler-config", &cm)
	var cfg struct {
		LeaderElection map[string]any `json:"leaderElection"`
	}
	if err := yaml.Unmarshal([]byte(cm.Data["scheduler-config.yaml"]), &cfg); err != nil {
		t.Fatal(err)
	}
	return cfg.LeaderElection
}

// TestLeaderElection: the timings and the Lease's place reach the
// scheduler's configuration and the descheduler's flags, only when set; the
// leader-election Role follows the Lease's namespace; and a value that turns
// leader election off makes the Deployment Recreate and NOTES.txt warn, or,
// with more than one replica, fails the rendering.
func TestLeaderElection(t *testing.T) {
	ch := loadChart(t)
	deschedulerArgs := func(t *testing.T, r *chartRender) []string {
		return r.podSpecs(t)["Deployment budgetguard-descheduler"].Containers[0].Args
	}
	strategy := func(t *testing.T, r *chartRender, name string) appsv1.DeploymentStrategyType {
		var d appsv1.Deployment
		r.get(t, "Deployment", name, &d)
		return d.Spec.Strategy.Type
	}

	t.Run("defaults", func(t *testing.T) {
		r := mustRender(t, ch)
		want := map[string]any{"leaderElect": true, "resourceName": "budgetguard-scheduler", "resourceNamespace": "kube-system"}
		if got := r.schedulerLeaderElection(t); !reflect.DeepEqual(got, want) {
			t.Errorf("scheduler leaderElection %v, want %v (the binary's timings)", got, want)
		}
		for _, a := range deschedulerArgs(t, r) {
			if strings.HasPrefix(a, "--leader-elect-lease-duration") || strings.HasPrefix(a, "--leader-elect-renew-deadline") || strings.HasPrefix(a, "--leader-elect-retry-period") {
				t.Errorf("descheduler flag %s without a value that sets it", a)
			}
		}
		for _, name := range []string{"budgetguard-scheduler", "budgetguard-descheduler"} {
			if got := strategy(t, r, name); got == appsv1.RecreateDeploymentStrategyType {
				t.Errorf("Deployment %s: strategy %s under leader election", name, got)
			}
		}
		if strings.Contains(r.notes, "WARNING") {
			t.Errorf("NOTES.txt warns with the defaults:\n%s", r.notes)
		}
	})

	t.Run("timings and the Lease's namespace", func(t *testing.T) {
		r := mustRender(t, ch,
			"scheduler.leaderElection.leaseDuration=30s", "scheduler.leaderElection.renewDeadline=20s", "scheduler.leaderElection.retryPeriod=4s",
			"scheduler.leaderElection.resourceNamespace=leases", "scheduler.leaderElection.resourceName=bg-sched",
			"descheduler.leaderElection.leaseDuration=60s", "descheduler.leaderElection.renewDeadline=40s", "descheduler.leaderElection.retryPeriod=5s",
			"descheduler.leaderElection.resourceNamespace=leases")
		want := map[string]any{"leaderElect": true, "resourceName": "bg-sched", "resourceNamespace": "leases",
			"leaseDuration": "30s", "renewDeadline": "20s", "retryPeriod": "4s"}
		if got := r.schedulerLeaderElection(t); !reflect.DeepEqual(got, want) {
			t.Errorf("scheduler leaderElection %v, want %v", got, want)
		}
		args := deschedulerArgs(t, r)
		for _, want := range []string{"--leader-elect=true", "--leader-elect-resource-name=budgetguard-descheduler", "--leader-elect-resource-namespace=leases",
			"--leader-elect-lease-duration=60s", "--leader-elect-renew-deadline=40s", "--leader-elect-retry-period=5s"} {
			if !slices.Contains(args, want) {
				t.Errorf("descheduler args %v lack %s", args, want)
			}
		}
		for _, name := range []string{"budgetguard-scheduler-leader-election", "budgetguard-descheduler-leader-election"} {
			for _, kind := range []string{"Role", "RoleBinding"} {
				var obj struct {
					Metadata struct{ Namespace string } `json:"metadata"`
				}
				if err := yaml.Unmarshal(r.objects[kind+" "+name], &obj); err != nil || obj.Metadata.Namespace != "leases" {
					t.Errorf("%s %s in namespace %q (%v), want the Lease's, leases", kind, name, obj.Metadata.Namespace, err)
				}
			}
		}
	})

	for _, tc := range []struct {
		name, component string
		set             []string
		notes           string
	}{
		{"scheduler.leaderElection.enabled=false", "scheduler",
			[]string{"scheduler.replicas=1", "scheduler.leaderElection.enabled=false"}, "scheduler.leaderElection.enabled=false"},
		{"--leader-elect=false in scheduler.extraArgs", "scheduler",
			[]string{"scheduler.replicas=1", "scheduler.extraArgs={--leader-elect=false}"}, "--leader-elect=false in scheduler.extraArgs"},
		{"descheduler.leaderElection.enabled=false", "descheduler",
			[]string{"descheduler.replicas=1", "descheduler.leaderElection.enabled=false"}, "descheduler.leaderElection.enabled=false"},
		{"--leader-elect=false in descheduler.extraArgs", "descheduler",
			[]string{"descheduler.replicas=1", "descheduler.extraArgs={--v=4,--leader-elect=false}"}, "--leader-elect=false in descheduler.extraArgs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := mustRender(t, ch, tc.set...)
			warning := "WARNING: the " + tc.component + " runs without leader election\n(" + tc.notes + ")"
			if !strings.Contains(r.notes, warning) {
				t.Errorf("NOTES.txt lacks %q:\n%s", warning, r.notes)
			}
			if got := strings.Count(r.notes, "WARNING"); got != 1 {
				t.Errorf("NOTES.txt has %d warnings, want 1:\n%s", got, r.notes)
			}
			if got := strategy(t, r, "budgetguard-"+tc.component); got != appsv1.RecreateDeploymentStrategyType {
				t.Errorf("Deployment budgetguard-%s: strategy %q without leader election, want Recreate", tc.component, got)
			}
			// Two replicas without leader election: refused, naming the values.
			_, err := renderSet(ch, append(tc.set, tc.component+".replicas=2")...)
			if err == nil || !strings.Contains(err.Error(), tc.component+".replicas above 1 needs leader election") {
				t.Errorf("two replicas without leader election: error %v, want one naming %s.replicas", err, tc.component)
			}
		})
	}

	t.Run("a CronJob needs none", func(t *testing.T) {
		r := mustRender(t, ch, "descheduler.kind=CronJob")
		if strings.Contains(r.notes, "WARNING") {
			t.Errorf("NOTES.txt warns for a CronJob:\n%s", r.notes)
		}
	})
}

// TestPodOverrides: probes, topology spread and the CronJob's history reach
// the rendered objects; a probe's fields merge into the chart's default, and
// null drops it; a topology spread constraint without a labelSelector
// selects the component's own pods.
func TestPodOverrides(t *testing.T) {
	ch := loadChart(t)
	container := func(t *testing.T, r *chartRender, workload string) corev1.Container {
		spec, ok := r.podSpecs(t)[workload]
		if !ok {
			t.Fatalf("no %s rendered", workload)
		}
		return spec.Containers[0]
	}

	t.Run("defaults", func(t *testing.T) {
		r := mustRender(t, ch)
		s := container(t, r, "Deployment budgetguard-scheduler")
		if s.LivenessProbe == nil || s.LivenessProbe.HTTPGet.Path != "/livez" || s.ReadinessProbe == nil || s.ReadinessProbe.HTTPGet.Path != "/readyz" || s.StartupProbe != nil {
			t.Errorf("scheduler probes: liveness %v, readiness %v, startup %v; want /livez, /readyz, none", s.LivenessProbe, s.ReadinessProbe, s.StartupProbe)
		}
		d := container(t, r, "Deployment budgetguard-descheduler")
		if d.LivenessProbe == nil || d.LivenessProbe.HTTPGet.Path != "/healthz" || d.ReadinessProbe != nil || d.StartupProbe != nil {
			t.Errorf("descheduler probes: liveness %v, readiness %v, startup %v; want /healthz, none, none", d.LivenessProbe, d.ReadinessProbe, d.StartupProbe)
		}
		for workload, spec := range r.podSpecs(t) {
			if len(spec.TopologySpreadConstraints) != 0 {
				t.Errorf("%s: topology spread constraints %v by default", workload, spec.TopologySpreadConstraints)
			}
		}
	})

	t.Run("overrides", func(t *testing.T) {
		r := mustRender(t, ch,
			"scheduler.livenessProbe.initialDelaySeconds=40", "scheduler.readinessProbe=null",
			"scheduler.startupProbe.httpGet.path=/livez", "scheduler.startupProbe.httpGet.port=https", "scheduler.startupProbe.httpGet.scheme=HTTPS", "scheduler.startupProbe.failureThreshold=30",
			"descheduler.readinessProbe.httpGet.path=/healthz", "descheduler.readinessProbe.httpGet.port=https",
			"scheduler.topologySpreadConstraints[0].maxSkew=1", "scheduler.topologySpreadConstraints[0].topologyKey=topology.kubernetes.io/zone",
			"scheduler.topologySpreadConstraints[0].whenUnsatisfiable=ScheduleAnyway",
			"descheduler.topologySpreadConstraints[0].maxSkew=1", "descheduler.topologySpreadConstraints[0].topologyKey=kubernetes.io/hostname",
			"descheduler.topologySpreadConstraints[0].whenUnsatisfiable=DoNotSchedule", "descheduler.topologySpreadConstraints[0].labelSelector.matchLabels.team=ops")
		s := container(t, r, "Deployment budgetguard-scheduler")
		if p := s.LivenessProbe; p == nil || p.InitialDelaySeconds != 40 || p.HTTPGet == nil || p.HTTPGet.Path != "/livez" {
			t.Errorf("scheduler liveness probe %v, want the default's /livez with initialDelaySeconds 40", p)
		}
		if s.ReadinessProbe != nil {
			t.Errorf("scheduler readiness probe %v, want none (null)", s.ReadinessProbe)
		}
		if p := s.StartupProbe; p == nil || p.FailureThreshold != 30 || p.HTTPGet == nil || p.HTTPGet.Path != "/livez" {
			t.Errorf("scheduler startup probe %v, want /livez with failureThreshold 30", p)
		}
		if p := container(t, r, "Deployment budgetguard-descheduler").ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" {
			t.Errorf("descheduler readiness probe %v, want /healthz", p)
		}
		specs := r.podSpecs(t)
		for workload, want := range map[string]map[string]string{
			"Deployment budgetguard-scheduler":   {"app.kubernetes.io/name": "budgetguard", "app.kubernetes.io/instance": "budgetguard", "app.kubernetes.io/component": "scheduler"},
			"Deployment budgetguard-descheduler": {"team": "ops"},
		} {
			tsc := specs[workload].TopologySpreadConstraints
			if len(tsc) != 1 || tsc[0].MaxSkew != 1 || tsc[0].LabelSelector == nil || !reflect.DeepEqual(tsc[0].LabelSelector.MatchLabels, want) {
				t.Errorf("%s: topology spread constraints %+v, want one with maxSkew 1 selecting %v", workload, tsc, want)
			}
		}
	})

	t.Run("CronJob", func(t *testing.T) {
		var c batchv1.CronJob
		mustRender(t, ch, "descheduler.kind=CronJob").get(t, "CronJob", "budgetguard-descheduler", &c)
		if c.Spec.ConcurrencyPolicy != batchv1.ForbidConcurrent || c.Spec.SuccessfulJobsHistoryLimit == nil || *c.Spec.SuccessfulJobsHistoryLimit != 3 ||
			c.Spec.FailedJobsHistoryLimit == nil || *c.Spec.FailedJobsHistoryLimit != 1 {
			t.Errorf("CronJob spec %+v, want Forbid and history limits 3 and 1", c.Spec)
		}
		mustRender(t, ch, "descheduler.kind=CronJob", "descheduler.concurrencyPolicy=Replace",
			"descheduler.successfulJobsHistoryLimit=0", "descheduler.failedJobsHistoryLimit=5").get(t, "CronJob", "budgetguard-descheduler", &c)
		if c.Spec.ConcurrencyPolicy != batchv1.ReplaceConcurrent || *c.Spec.SuccessfulJobsHistoryLimit != 0 || *c.Spec.FailedJobsHistoryLimit != 5 {
			t.Errorf("CronJob spec %+v, want Replace and history limits 0 and 5", c.Spec)
		}
		_, err := renderSet(ch, "descheduler.kind=CronJob", "descheduler.concurrencyPolicy=Allow")
		// The schema refuses it first; templates/validate.yaml, where the
		// schema is skipped.
		if err == nil || !strings.Contains(err.Error(), "/descheduler/concurrencyPolicy") {
			t.Errorf("concurrencyPolicy Allow: error %v, want one naming descheduler.concurrencyPolicy", err)
		}
	})
}

// TestSchedulerPodDisruptionBudget: with more than one replica, a PDB
// selects exactly the scheduler's pods, with maxUnavailable 1 unless told
// otherwise; one replica or enabled=false renders none; minAvailable and
// maxUnavailable together are refused.
func TestSchedulerPodDisruptionBudget(t *testing.T) {
	ch := loadChart(t)
	for _, tc := range []struct {
		name string
		set  []string
		want string // the PDB's spec without its selector, as JSON; "" for no PDB
	}{
		{name: "defaults", want: `{"maxUnavailable":1,"unhealthyPodEvictionPolicy":"AlwaysAllow"}`},
		{name: "minAvailable as a percentage", set: []string{"scheduler.replicas=3", "scheduler.podDisruptionBudget.minAvailable=50%", "scheduler.podDisruptionBudget.unhealthyPodEvictionPolicy="},
			want: `{"minAvailable":"50%"}`},
		{name: "maxUnavailable", set: []string{"scheduler.replicas=4", "scheduler.podDisruptionBudget.maxUnavailable=2"},
			want: `{"maxUnavailable":2,"unhealthyPodEvictionPolicy":"AlwaysAllow"}`},
		{name: "one replica", set: []string{"scheduler.replicas=1"}},
		{name: "disabled", set: []string{"scheduler.podDisruptionBudget.enabled=false"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := mustRender(t, ch, tc.set...)
			if names := r.names("PodDisruptionBudget"); tc.want == "" {
				if len(names) != 0 {
					t.Errorf("PodDisruptionBudgets %v, want none", names)
				}
				return
			}
			var pdb struct {
				Spec map[string]any `json:"spec"`
			}
			if err := yaml.Unmarshal(r.objects["PodDisruptionBudget budgetguard-scheduler"], &pdb); err != nil || pdb.Spec == nil {
				t.Fatalf("PodDisruptionBudget budgetguard-scheduler: %v; rendered %v", err, r.names("PodDisruptionBudget"))
			}
			selector := pdb.Spec["selector"]
			delete(pdb.Spec, "selector")
			if got, _ := json.Marshal(pdb.Spec); string(got) != tc.want {
				t.Errorf("PDB spec %s, want %s", got, tc.want)
			}
			var d appsv1.Deployment
			r.get(t, "Deployment", "budgetguard-scheduler", &d)
			want, _ := json.Marshal(d.Spec.Selector)
			if got, _ := json.Marshal(selector); string(got) != string(want) {
				t.Errorf("PDB selector %s, want the Deployment's %s", got, want)
			}
		})
	}
	_, err := renderSet(ch, "scheduler.podDisruptionBudget.minAvailable=1", "scheduler.podDisruptionBudget.maxUnavailable=1")
	if err == nil || !strings.Contains(err.Error(), "scheduler.podDisruptionBudget: set minAvailable or maxUnavailable, not both") {
		t.Errorf("both minAvailable and maxUnavailable: error %v, want the chart's refusal", err)
	}
}

// TestSchemaRefusesMistakes: values.schema.json makes a misspelt or unknown
// key, or a value of the wrong type, an error that names it, at any level
// the chart owns, as `helm template`, `install` and `lint` check it.
func TestSchemaRefusesMistakes(t *testing.T) {
	ch := loadChart(t)
	for _, tc := range []struct {
		set  string
		want []string // each must be in the error
	}{
		{"schedular.enabled=false", []string{"additional properties 'schedular' not allowed"}},
		{"scheduler.replicaz=3", []string{"at '/scheduler'", "'replicaz' not allowed"}},
		{"scheduler.replicas=two", []string{"at '/scheduler/replicas'", "want integer"}},
		{"descheduler.leaderElection.leaseDuraton=15s", []string{"at '/descheduler/leaderElection'", "'leaseDuraton' not allowed"}},
		{"descheduler.leaderElection.leaseDuration=15", []string{"at '/descheduler/leaderElection/leaseDuration'"}},
		{"scheduler.pluginArgs.overideBudgetsAtPriority=5", []string{"at '/scheduler/pluginArgs'", "'overideBudgetsAtPriority' not allowed"}},
		{"scheduler.pluginArgs.mode=strict", []string{"at '/scheduler/pluginArgs/mode'"}},
		{"rbac.enabled=false", []string{"at '/rbac'", "'enabled' not allowed"}},
		{"scheduler.serviceAccount.crate=false", []string{"at '/scheduler/serviceAccount'", "'crate' not allowed"}},
		{"descheduler.kind=Job", []string{"at '/descheduler/kind'"}},
		{"descheduler.successfulJobsHistoryLimit=-1", []string{"at '/descheduler/successfulJobsHistoryLimit'"}},
		{"scheduler.podDisruptionBudget.maxUnavailable=one", []string{"at '/scheduler/podDisruptionBudget/maxUnavailable'"}},
		{"serviceMonitor.enable=true", []string{"at '/serviceMonitor'", "'enable' not allowed"}},
		{"prometheusRule.enable=true", []string{"at '/prometheusRule'", "'enable' not allowed"}},
		{"prometheusRule.additionalLabels.release=null", []string{"at '/prometheusRule/additionalLabels/release'"}},
		{"grafanaDashboard.labels.grafana_dashboard=1", []string{"at '/grafanaDashboard'", "'labels' not allowed"}},
		{"grafanaDashboard.label=grafana dashboard", []string{"at '/grafanaDashboard/label'"}},
		{"grafanaDashboard.labelValue=-1-", []string{"at '/grafanaDashboard/labelValue'"}},
	} {
		t.Run(tc.set, func(t *testing.T) {
			_, err := renderSet(ch, tc.set)
			if err == nil {
				t.Fatal("rendered without an error")
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}
