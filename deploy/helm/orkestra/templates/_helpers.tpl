{{/* The release's name for its objects: <release>-orkestra, or the release's own name when it says orkestra already. */}}
{{- define "orkestra.fullname" -}}
{{- if contains "orkestra" .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-orkestra" .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "orkestra.labels" -}}
app.kubernetes.io/name: orkestra
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Selector labels of one component (runtime, gateway, control-center): pass (list $ "runtime"). */}}
{{- define "orkestra.selector" -}}
{{- $ := index . 0 -}}
app.kubernetes.io/name: orkestra
app.kubernetes.io/instance: {{ $.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "orkestra.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "orkestra.liveApiSecret" -}}
{{- .Values.liveApi.existingSecret | default (printf "%s-live-api" (include "orkestra.fullname" .)) -}}
{{- end -}}

{{- define "orkestra.controlCenterSecret" -}}
{{- .Values.controlCenter.existingSecret | default (printf "%s-control-center" (include "orkestra.fullname" .)) -}}
{{- end -}}

{{/* What the chart refuses before anything is applied, each naming the value to fix. */}}
{{- define "orkestra.checks" -}}
{{- if not .Values.katalog -}}
{{- fail "katalog: give the Katalog file: --set-file katalog=katalog.yaml" -}}
{{- end -}}
{{- if not .Values.rbac.manifests -}}
{{- fail (printf "rbac.manifests: give the RBAC the Katalog needs: ork manifests -f katalog.yaml -n %s --service-account %s > rbac.yaml, then --set-file rbac.manifests=rbac.yaml" .Release.Namespace .Values.serviceAccount.name) -}}
{{- end -}}
{{- /* Every binding's subject is this release's ServiceAccount, as ork manifests writes it. */ -}}
{{- $subject := printf "- kind: ServiceAccount\n  name: %s\n  namespace: %s\n" .Values.serviceAccount.name .Release.Namespace -}}
{{- $manifests := printf "%s\n" .Values.rbac.manifests -}}
{{- if ne (len (regexFindAll "kind: ServiceAccount\n" $manifests -1)) (len (regexFindAll (regexQuoteMeta $subject) $manifests -1)) -}}
{{- fail (printf "rbac.manifests: made for another ServiceAccount or namespace; run ork manifests -n %s --service-account %s" .Release.Namespace .Values.serviceAccount.name) -}}
{{- end -}}
{{- if not (contains $subject $manifests) -}}
{{- fail (printf "rbac.manifests: binds no ServiceAccount; run ork manifests -n %s --service-account %s" .Release.Namespace .Values.serviceAccount.name) -}}
{{- end -}}
{{- if not (has .Values.runtime.ha (list "none" "leader" "shard")) -}}
{{- fail (printf "runtime.ha: %q is not none, leader or shard" .Values.runtime.ha) -}}
{{- end -}}
{{- if and (eq .Values.runtime.ha "none") (gt (int .Values.runtime.replicas) 1) -}}
{{- fail "runtime.replicas: more than one replica needs runtime.ha leader or shard (two replicas without would both reconcile every CR)" -}}
{{- end -}}
{{- end -}}
