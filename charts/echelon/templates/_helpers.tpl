{{/*
Names are cut to 63 characters: that is the limit of a label value, and every
name here is also used as one.
*/}}

{{- define "echelon.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
echelon.fullname prefixes every resource of the release. A release called
"echelon" gives "echelon" rather than "echelon-echelon".
*/}}
{{- define "echelon.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "echelon.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
echelon.selectorLabels must never change between chart versions: a Deployment's
selector is immutable, so a change would make upgrades fail.
*/}}
{{- define "echelon.selectorLabels" -}}
app.kubernetes.io/name: {{ include "echelon.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "echelon.labels" -}}
helm.sh/chart: {{ include "echelon.chart" . }}
{{ include "echelon.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: echelon
{{- end }}

{{- define "echelon.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "echelon.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "echelon.leaseName" -}}
{{- default (include "echelon.fullname" .) .Values.leaderElection.leaseName }}
{{- end }}

{{/*
echelon.image prefers the digest, which pins the exact image, over the tag.
*/}}
{{- define "echelon.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/*
echelon.args is the operator's command line. Every setting is passed even when it
equals the binary's default, so that `kubectl describe` shows the whole
configuration and a new binary default cannot change a running install. The
flags for calling pods over HTTP (--pod-address, --cluster-domain) are left out
until a feature uses them.
*/}}
{{- define "echelon.args" -}}
- --http-port={{ .Values.http.port }}
- --leader-elect={{ .Values.leaderElection.enabled }}
{{- if .Values.leaderElection.enabled }}
- --leader-election-id={{ include "echelon.leaseName" . }}
- --leader-elect-lease-duration={{ .Values.leaderElection.leaseDuration }}
- --leader-elect-renew-deadline={{ .Values.leaderElection.renewDeadline }}
- --leader-elect-retry-period={{ .Values.leaderElection.retryPeriod }}
{{- end }}
{{- with .Values.watchNamespaces }}
- --namespaces={{ join "," . }}
{{- end }}
- --pod-address={{ .Values.podAddress }}
{{- if .Values.grafanaCompat }}
- --grafana-compat
- --grafana-compat-service={{ .Values.grafanaCompatService.name }}
{{- end }}
- --cluster-domain={{ .Values.clusterDomain }}
- --egress-allow={{ join "," .Values.egress.allow }}
- --kube-api-qps={{ .Values.kubeAPI.qps }}
- --kube-api-burst={{ .Values.kubeAPI.burst }}
- --log-format={{ .Values.logging.format }}
- --log-level={{ .Values.logging.level }}
{{- if .Values.webhooks.enabled }}
- --webhook-port={{ .Values.webhooks.port }}
- --validate-webhook-failure-policy={{ .Values.webhooks.validation.failurePolicy }}
- --webhook-kube-api-qps={{ .Values.webhooks.kubeAPI.qps }}
- --webhook-kube-api-burst={{ .Values.webhooks.kubeAPI.burst }}
- --downscale-budget-webhook-failure-policy={{ .Values.webhooks.downscaleBudget.failurePolicy }}
{{- if eq .Values.webhooks.certificates.mode "selfSigned" }}
- --webhook-cert-secret={{ include "echelon.webhookSecretName" . }}
- --webhook-service={{ include "echelon.webhookServiceName" . }}
- --webhook-cert-validity={{ .Values.webhooks.certificates.selfSigned.certValidity }}
- --webhook-ca-validity={{ .Values.webhooks.certificates.selfSigned.caValidity }}
{{- else }}
- --tls-cert-file={{ include "echelon.webhookCertDir" . }}/tls.crt
- --tls-key-file={{ include "echelon.webhookCertDir" . }}/tls.key
{{- end }}
{{- else }}
- --webhook-port=0
{{- end }}
{{- range .Values.extraArgs }}
- {{ . }}
{{- end }}
{{- end }}

{{/*
echelon.validate stops the release on combinations of values that the schema
cannot express clearly. Its output is empty.
*/}}
{{- define "echelon.validate" -}}
{{- if and (gt (int .Values.replicas) 1) (not .Values.leaderElection.enabled) }}
{{- fail (printf "replicas=%d needs leaderElection.enabled=true: without a leader, every replica would roll pods at once" (int .Values.replicas)) }}
{{- end }}
{{- if and .Values.webhooks.enabled (eq .Values.webhooks.certificates.mode "secret") }}
{{- if not .Values.webhooks.certificates.secret.name }}
{{- fail "webhooks.certificates.mode=secret needs webhooks.certificates.secret.name: the Secret (tls.crt, tls.key) the webhook server serves" }}
{{- end }}
{{- if not .Values.webhooks.certificates.secret.caBundle }}
{{- fail "webhooks.certificates.mode=secret needs webhooks.certificates.secret.caBundle: the base64 PEM of the CA that signed the Secret's certificate, which the API server must trust" }}
{{- end }}
{{- end }}
{{- if and .Values.grafanaCompat .Values.webhooks.enabled .Values.rbac.create (not .Values.grafanaCompatWebhookConfigurations.validating) (not .Values.grafanaCompatWebhookConfigurations.mutating) }}
{{- fail "grafanaCompat with webhooks.enabled needs grafanaCompatWebhookConfigurations.validating and/or .mutating: the names of the Grafana rollout-operator's webhook configurations, the only ones the operator may patch (list them with: kubectl get validatingwebhookconfigurations,mutatingwebhookconfigurations -l grafana.com/inject-rollout-operator-ca=true)" }}
{{- end }}
{{- if and .Values.rbac.analysisSecretsClusterWide .Values.rbac.analysisSecretNamespaces }}
{{- fail "rbac.analysisSecretsClusterWide grants get on Secrets in every namespace: leave rbac.analysisSecretNamespaces empty, or turn it off to grant only those namespaces" }}
{{- end }}
{{- if .Values.watchNamespaces }}
{{- range .Values.rbac.analysisSecretNamespaces }}
{{- if not (has . $.Values.watchNamespaces) }}
{{- fail (printf "rbac.analysisSecretNamespaces names %s, which watchNamespaces leaves out: the operator reads no RolloutGroup there" .) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Webhook names. The Service and the Secret names are also the operator's
--webhook-service and --webhook-cert-secret; for a release "echelon" they are
the binary's defaults. The full name is cut so that each stays a valid
Service name (63 characters).
*/}}
{{- define "echelon.webhookServiceName" -}}
{{- printf "%s-webhook" (include "echelon.fullname" . | trunc 55 | trimSuffix "-") }}
{{- end }}

{{- define "echelon.webhookSecretName" -}}
{{- if eq .Values.webhooks.certificates.mode "secret" }}
{{- .Values.webhooks.certificates.secret.name }}
{{- else if eq .Values.webhooks.certificates.mode "selfSigned" }}
{{- default (printf "%s-webhook-tls" (include "echelon.fullname" . | trunc 51 | trimSuffix "-")) .Values.webhooks.certificates.selfSigned.secretName }}
{{- else }}
{{- printf "%s-webhook-tls" (include "echelon.fullname" . | trunc 51 | trimSuffix "-") }}
{{- end }}
{{- end }}

{{/*
echelon.webhookCertDir is where the certManager and secret modes mount the
serving certificate's Secret; the operator reloads the files when the kubelet
updates them after a renewal.
*/}}
{{- define "echelon.webhookCertDir" -}}
/etc/echelon/webhook-tls
{{- end }}

{{/*
echelon.webhookNamespaceSelector is webhooks.namespaceSelector, or by default
every namespace but kube-system and the release's (whose Deployment must stay
scalable while no replica answers), and with watchNamespaces only those: the
operator sees no ScalingPolicy elsewhere, so calling it there could only
refuse requests while it is down.
*/}}
{{- define "echelon.webhookNamespaceSelector" -}}
{{- if .Values.webhooks.namespaceSelector }}
{{- toYaml .Values.webhooks.namespaceSelector }}
{{- else -}}
matchExpressions:
  - key: kubernetes.io/metadata.name
    operator: NotIn
    values: [kube-system, {{ .Release.Namespace | quote }}]
  {{- with .Values.watchNamespaces }}
  - key: kubernetes.io/metadata.name
    operator: In
    values:
      {{- toYaml . | nindent 6 }}
  {{- end }}
{{- end }}
{{- end }}

{{/*
echelon.metricsSelector holds the PromQL label matchers that select this
release's operator series in alerts: the job a ServiceMonitor of this chart
gives them (the metrics Service's name), unless prometheusRule.selector says
otherwise. Not the namespace: Echelon's own series carry the RolloutGroup's
namespace in that label.
*/}}
{{- define "echelon.metricsSelector" -}}
{{- default (printf "job=%q" (printf "%s-metrics" (include "echelon.fullname" .))) .Values.prometheusRule.selector }}
{{- end }}
