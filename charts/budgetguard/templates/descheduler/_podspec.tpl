{{/* The descheduler's pod spec, shared by the Deployment and the CronJob. */}}
{{- define "budgetguard.descheduler.podSpec" -}}
serviceAccountName: {{ include "budgetguard.descheduler.serviceAccountName" . }}
{{- with .Values.descheduler.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- if eq .Values.descheduler.kind "CronJob" }}
restartPolicy: Never
{{- end }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
containers:
- name: descheduler
  image: {{ include "budgetguard.image" (dict "image" .Values.descheduler.image "ctx" .) }}
  imagePullPolicy: {{ .Values.descheduler.image.pullPolicy }}
  command:
  - /descheduler
  args:
  - --policy-config-file=/policy-dir/policy.yaml
  - --secure-port={{ .Values.descheduler.port }}
  {{- if eq .Values.descheduler.kind "Deployment" }}
  - --descheduling-interval={{ .Values.descheduler.deschedulingInterval }}
  {{- end }}
  {{- if include "budgetguard.descheduler.leaderElect" . }}
  - --leader-elect=true
  - --leader-elect-resource-name={{ include "budgetguard.descheduler.leaseName" . }}
  - --leader-elect-resource-namespace={{ include "budgetguard.descheduler.leaseNamespace" . }}
  {{- with .Values.descheduler.leaderElection.leaseDuration }}
  - --leader-elect-lease-duration={{ . }}
  {{- end }}
  {{- with .Values.descheduler.leaderElection.renewDeadline }}
  - --leader-elect-renew-deadline={{ . }}
  {{- end }}
  {{- with .Values.descheduler.leaderElection.retryPeriod }}
  - --leader-elect-retry-period={{ . }}
  {{- end }}
  {{- end }}
  - --v={{ .Values.descheduler.verbosity }}
  {{- with .Values.descheduler.extraArgs }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
  ports:
  - name: https
    containerPort: {{ .Values.descheduler.port }}
  {{- if eq .Values.descheduler.kind "Deployment" }}
  {{- with .Values.descheduler.livenessProbe }}
  livenessProbe:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.descheduler.readinessProbe }}
  readinessProbe:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.descheduler.startupProbe }}
  startupProbe:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- end }}
  resources:
    {{- toYaml .Values.descheduler.resources | nindent 4 }}
  securityContext:
    {{- toYaml .Values.securityContext | nindent 4 }}
  volumeMounts:
  - name: policy-volume
    mountPath: /policy-dir
    readOnly: true
{{- with .Values.descheduler.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.descheduler.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.descheduler.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.descheduler.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- include "budgetguard.topologySpreadConstraints" (dict "ctx" $ "component" "descheduler" "constraints" .) | nindent 2 }}
{{- end }}
volumes:
- name: policy-volume
  configMap:
    name: {{ include "budgetguard.descheduler.fullname" . }}-policy
{{- end -}}

{{/* The descheduler's pod metadata. */}}
{{- define "budgetguard.descheduler.podMetadata" -}}
labels:
  {{- include "budgetguard.selectorLabels" (dict "ctx" . "component" "descheduler") | nindent 2 }}
  {{- with .Values.descheduler.podLabels }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
annotations:
  checksum/policy: {{ include "budgetguard.descheduler.policy" . | sha256sum }}
  {{- with .Values.descheduler.podAnnotations }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end -}}
