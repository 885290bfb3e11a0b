{{/* The chart's name. */}}
{{- define "budgetguard.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The prefix of every object's name: the release name, plus the chart's name
unless the release name contains it. Truncated so that the component suffixes
still fit in 63 characters.
*/}}
{{- define "budgetguard.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "budgetguard.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "budgetguard.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels of every object; pass a dict with "ctx" (the root) and "component". */}}
{{- define "budgetguard.labels" -}}
{{ include "budgetguard.selectorLabels" . }}
helm.sh/chart: {{ include "budgetguard.chart" .ctx }}
{{- if .ctx.Chart.AppVersion }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
{{- end }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
{{- with .ctx.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Selector labels; pass a dict with "ctx" and "component". */}}
{{- define "budgetguard.selectorLabels" -}}
app.kubernetes.io/name: {{ include "budgetguard.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "budgetguard.scheduler.fullname" -}}
{{- printf "%s-scheduler" (include "budgetguard.fullname" .) -}}
{{- end -}}

{{- define "budgetguard.descheduler.fullname" -}}
{{- printf "%s-descheduler" (include "budgetguard.fullname" .) -}}
{{- end -}}

{{- define "budgetguard.scheduler.serviceAccountName" -}}
{{- default (include "budgetguard.scheduler.fullname" .) .Values.scheduler.serviceAccount.name -}}
{{- end -}}

{{- define "budgetguard.descheduler.serviceAccountName" -}}
{{- default (include "budgetguard.descheduler.fullname" .) .Values.descheduler.serviceAccount.name -}}
{{- end -}}

{{- define "budgetguard.scheduler.leaseName" -}}
{{- default (include "budgetguard.scheduler.fullname" .) .Values.scheduler.leaderElection.resourceName -}}
{{- end -}}

{{- define "budgetguard.descheduler.leaseName" -}}
{{- default (include "budgetguard.descheduler.fullname" .) .Values.descheduler.leaderElection.resourceName -}}
{{- end -}}

{{/*
An image reference; pass the component's image values and the root. The
default tag is the chart's appVersion with one leading "v": the images are
tagged v0.1.0 whether appVersion says 0.1.0 or v0.1.0.
*/}}
{{- define "budgetguard.image" -}}
{{- $tag := .image.tag | default (printf "v%s" (trimPrefix "v" (toString .ctx.Chart.AppVersion))) -}}
{{- printf "%s:%s" .image.repository $tag -}}
{{- end -}}

{{- define "budgetguard.scheduler.leaseNamespace" -}}
{{- default (include "budgetguard.namespace" .) .Values.scheduler.leaderElection.resourceNamespace -}}
{{- end -}}

{{- define "budgetguard.descheduler.leaseNamespace" -}}
{{- default (include "budgetguard.namespace" .) .Values.descheduler.leaderElection.resourceNamespace -}}
{{- end -}}

{{/*
Whether extraArgs (pass the component's values) turn leader election off
with --leader-elect=false, which both binaries honour over the chart's own
setting.
*/}}
{{- define "budgetguard.extraArgsDisableLeaderElection" -}}
{{- range .extraArgs -}}
{{- if has (toString .) (list "--leader-elect=false" "-leader-elect=false") -}}true{{- end -}}
{{- end -}}
{{- end -}}

{{/* Whether the scheduler runs under leader election. */}}
{{- define "budgetguard.scheduler.leaderElect" -}}
{{- if and .Values.scheduler.leaderElection.enabled (not (include "budgetguard.extraArgsDisableLeaderElection" .Values.scheduler)) -}}true{{- end -}}
{{- end -}}

{{/* Whether the descheduler runs under leader election (a Deployment only). */}}
{{- define "budgetguard.descheduler.leaderElect" -}}
{{- if and (eq .Values.descheduler.kind "Deployment") .Values.descheduler.leaderElection.enabled (not (include "budgetguard.extraArgsDisableLeaderElection" .Values.descheduler)) -}}true{{- end -}}
{{- end -}}

{{/* The KubeSchedulerConfiguration. */}}
{{- define "budgetguard.scheduler.config" -}}
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: {{ .Values.scheduler.leaderElection.enabled }}
  resourceNamespace: {{ include "budgetguard.scheduler.leaseNamespace" . }}
  resourceName: {{ include "budgetguard.scheduler.leaseName" . }}
  {{- with .Values.scheduler.leaderElection.leaseDuration }}
  leaseDuration: {{ . }}
  {{- end }}
  {{- with .Values.scheduler.leaderElection.renewDeadline }}
  renewDeadline: {{ . }}
  {{- end }}
  {{- with .Values.scheduler.leaderElection.retryPeriod }}
  retryPeriod: {{ . }}
  {{- end }}
profiles:
- schedulerName: {{ .Values.scheduler.schedulerName }}
  plugins:
    preEnqueue:
      enabled:
      - name: BudgetAwarePreemption
      disabled:
      - name: DefaultPreemption
    postFilter:
      enabled:
      - name: BudgetAwarePreemption
      disabled:
      - name: DefaultPreemption
    podGroupPostFilter:
      enabled:
      - name: BudgetAwarePreemption
      disabled:
      - name: DefaultPreemption
  pluginConfig:
  - name: BudgetAwarePreemption
    {{- with .Values.scheduler.pluginArgs }}
    args:
      {{- toYaml . | nindent 6 }}
    {{- else }}
    args: {}
    {{- end }}
{{- end -}}

{{/* The DeschedulerPolicy. */}}
{{- define "budgetguard.descheduler.policy" -}}
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
{{ toYaml .Values.descheduler.deschedulerPolicy }}
{{- end -}}

{{/*
Topology spread constraints; pass a dict with "ctx", "component" and
"constraints". A constraint without a labelSelector selects the component's
pods.
*/}}
{{- define "budgetguard.topologySpreadConstraints" -}}
{{- $selector := fromYaml (include "budgetguard.selectorLabels" (dict "ctx" .ctx "component" .component)) -}}
{{- $out := list -}}
{{- range .constraints -}}
{{- $c := deepCopy . -}}
{{- if not (hasKey $c "labelSelector") -}}
{{- $_ := set $c "labelSelector" (dict "matchLabels" $selector) -}}
{{- end -}}
{{- $out = append $out $c -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}
