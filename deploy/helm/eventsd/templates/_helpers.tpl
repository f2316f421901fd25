{{/* The chart's name. */}}
{{- define "eventsd.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The objects' name: the release's, with the chart's unless it has it. */}}
{{- define "eventsd.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Labels selecting the pods. */}}
{{- define "eventsd.selectorLabels" -}}
app.kubernetes.io/name: {{ include "eventsd.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Labels of every object. */}}
{{- define "eventsd.labels" -}}
{{ include "eventsd.selectorLabels" . }}
app.kubernetes.io/part-of: kubevents
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end -}}

{{/* The ServiceAccount's name. */}}
{{- define "eventsd.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "eventsd.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The image reference: repository with the digest, else the tag. */}}
{{- define "eventsd.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* The storage backend, checked. */}}
{{- define "eventsd.backend" -}}
{{- $b := .Values.storage.backend -}}
{{- if not (has $b (list "pebble" "etcd")) -}}
{{- fail (printf "storage.backend must be pebble or etcd, not %q" $b) -}}
{{- end -}}
{{- if and (eq $b "etcd") (empty .Values.storage.etcd.servers) -}}
{{- fail "storage.backend etcd needs storage.etcd.servers (etcd's client URLs)" -}}
{{- end -}}
{{- $b -}}
{{- end -}}

{{/* Whether the pods need a service account token: to mirror, or to ask the cluster about clients. */}}
{{- define "eventsd.needsToken" -}}
{{- if or .Values.mirror.enabled .Values.auth.delegate -}}true{{- end -}}
{{- end -}}

{{/* The URL scheme eventsd serves. */}}
{{- define "eventsd.scheme" -}}
{{- if .Values.tls.enabled -}}HTTPS{{- else -}}HTTP{{- end -}}
{{- end -}}

{{/* The Secret eventsd serves HTTPS with: tls.secretName, else the one the chart generates (tls-secret.yaml). */}}
{{- define "eventsd.tlsSecretName" -}}
{{- default (printf "%s-tls" (include "eventsd.fullname" .)) .Values.tls.secretName -}}
{{- end -}}

{{/* The read-only ServiceAccount for reading eventsd's events (values viewer.*). */}}
{{- define "eventsd.viewerName" -}}
{{- printf "%s-viewer" (include "eventsd.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The pod template, the same for the StatefulSet and the Deployment. */}}
{{- define "eventsd.podTemplate" -}}
{{- $backend := include "eventsd.backend" . -}}
metadata:
  labels:
    {{- include "eventsd.selectorLabels" . | nindent 4 }}
    app.kubernetes.io/component: {{ ternary "mirror" "replica" (eq $backend "pebble") }}
    {{- with .Values.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  annotations:
    # A changed configuration restarts the pods.
    checksum/config: {{ include (print $.Template.BasePath "/configmap.yaml") . | sha256sum }}
    {{- with .Values.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  serviceAccountName: {{ include "eventsd.serviceAccountName" . }}
  automountServiceAccountToken: {{ ternary "true" "false" (eq (include "eventsd.needsToken" .) "true") }}
  terminationGracePeriodSeconds: {{ .Values.terminationGracePeriodSeconds }}
  {{- with .Values.podSecurityContext }}
  securityContext:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.priorityClassName }}
  priorityClassName: {{ . }}
  {{- end }}
  {{- with .Values.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.topologySpreadConstraints }}
  topologySpreadConstraints:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  containers:
    - name: eventsd
      image: {{ include "eventsd.image" . | quote }}
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      args:
        - --listen=:8080
        - --data-dir=/var/lib/eventsd
        {{- if eq $backend "pebble" }}
        - --max-storage-bytes={{ .Values.storage.maxStorageBytes }}
        {{- else }}
        - --storage-backend=etcd
        - --etcd-index={{ .Values.storage.etcd.index }}
        - --etcd-servers={{ join "," .Values.storage.etcd.servers }}
        - --etcd-prefix={{ .Values.storage.etcd.prefix }}
        - --etcd-compaction-interval={{ .Values.storage.etcd.compactionInterval }}
        - --lease-reuse-duration-seconds={{ .Values.storage.etcd.leaseReuseDurationSeconds }}
        {{- with .Values.storage.etcd.tlsSecretName }}
        - --etcd-cafile=/etc/eventsd/etcd-tls/ca.crt
        - --etcd-certfile=/etc/eventsd/etcd-tls/tls.crt
        - --etcd-keyfile=/etc/eventsd/etcd-tls/tls.key
        {{- end }}
        {{- end }}
        - --event-ttl={{ default (ternary "168h" "1h" (eq $backend "pebble")) .Values.eventTTL }}
        {{- if .Values.mirror.enabled }}
        - --source=in-cluster
        - --source-deletions={{ .Values.mirror.deletions }}
        - --source-event-ttl={{ .Values.mirror.sourceEventTTL }}
        {{- if not .Values.lineage.enabled }}
        - --lineage=false
        {{- end }}
        {{- end }}
        - --retention-config=/etc/eventsd/retention.yaml
        {{- if .Values.export.sinks }}
        - --export-config=/etc/eventsd/export.yaml
        {{- end }}
        {{- if not .Values.eventMetrics.enabled }}
        - --event-metrics=false
        {{- else if .Values.eventMetrics.config }}
        - --event-metrics-config=/etc/eventsd/event-metrics.yaml
        {{- end }}
        {{- if .Values.aggregation.enabled }}
        - --authentication-kubeconfig=in-cluster
        - --authorization-mode=Webhook
        - --authorization-kubeconfig=in-cluster
        {{- else if .Values.auth.delegate }}
        - --authentication-token-webhook-config-file=/etc/eventsd/tokenreview-kubeconfig.yaml
        - --authorization-mode=Webhook
        - --authorization-webhook-config-file=/etc/eventsd/subjectaccessreview-kubeconfig.yaml
        {{- end }}
        {{- if .Values.tls.enabled }}
        - --tls-cert-file=/etc/eventsd/tls/tls.crt
        - --tls-private-key-file=/etc/eventsd/tls/tls.key
        {{- end }}
        - --log-level={{ .Values.logLevel }}
        {{- with .Values.extraArgs }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      env:
        # The Go runtime's soft memory limit: the container's.
        - name: GOMEMLIMIT
          valueFrom:
            resourceFieldRef:
              resource: limits.memory
        {{- with .Values.extraEnv }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      ports:
        - name: http
          containerPort: 8080
      startupProbe:
        httpGet:
          path: /livez
          port: http
          scheme: {{ include "eventsd.scheme" . }}
        periodSeconds: 5
        failureThreshold: 60
      livenessProbe:
        httpGet:
          path: /livez
          port: http
          scheme: {{ include "eventsd.scheme" . }}
        periodSeconds: 10
        failureThreshold: 6
      # A mirror behind its source (or cut off from it) still serves what
      # it has: readiness leaves the mirror's check out (/readyz?verbose
      # shows it). The store's check stays: a full disk or an unreachable
      # etcd makes the pod unready until it recovers.
      readinessProbe:
        httpGet:
          path: {{ ternary "/readyz?exclude=mirror" "/readyz" .Values.mirror.enabled }}
          port: http
          scheme: {{ include "eventsd.scheme" . }}
        periodSeconds: 5
        failureThreshold: 2
      {{- if and (eq $backend "etcd") .Values.preStopSleepSeconds (semverCompare ">=1.30-0" .Capabilities.KubeVersion.Version) }}
      # eventsd stops listening at SIGTERM: a replica keeps serving while
      # kube-proxy drops its endpoint, so that no connection is refused.
      lifecycle:
        preStop:
          sleep:
            seconds: {{ .Values.preStopSleepSeconds }}
      {{- end }}
      {{- with .Values.resources }}
      resources:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.securityContext }}
      securityContext:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      volumeMounts:
        - name: data
          mountPath: /var/lib/eventsd
        - name: config
          mountPath: /etc/eventsd
          readOnly: true
        - name: tmp
          mountPath: /tmp
        {{- if .Values.tls.enabled }}
        - name: tls
          mountPath: /etc/eventsd/tls
          readOnly: true
        {{- end }}
        {{- if and (eq $backend "etcd") .Values.storage.etcd.tlsSecretName }}
        - name: etcd-tls
          mountPath: /etc/eventsd/etcd-tls
          readOnly: true
        {{- end }}
        {{- if .Values.caBundle.configMap }}
        - name: ca-bundle
          mountPath: /etc/ssl/certs/ca-certificates.crt
          subPath: {{ .Values.caBundle.key }}
          readOnly: true
        {{- end }}
        {{- with .Values.extraVolumeMounts }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
  volumes:
    {{- if eq $backend "etcd" }}
    # The on-disk index of events (storage.etcd.index=disk) lives in
    # --data-dir/etcd-index: kept across container restarts.
    - name: data
      emptyDir: {}
    {{- else if not .Values.storage.persistence.enabled }}
    # The store without a PersistentVolumeClaim (storage.persistence.enabled
    # false): kept across container restarts, lost with the pod.
    - name: data
      emptyDir:
        sizeLimit: {{ .Values.storage.persistence.size }}
    {{- end }}
    - name: config
      configMap:
        name: {{ include "eventsd.fullname" . }}
    - name: tmp
      emptyDir: {}
    {{- if .Values.tls.enabled }}
    - name: tls
      secret:
        secretName: {{ include "eventsd.tlsSecretName" . }}
        defaultMode: 0440
    {{- end }}
    {{- if and (eq $backend "etcd") .Values.storage.etcd.tlsSecretName }}
    - name: etcd-tls
      secret:
        secretName: {{ .Values.storage.etcd.tlsSecretName }}
        defaultMode: 0440
    {{- end }}
    {{- with .Values.caBundle.configMap }}
    - name: ca-bundle
      configMap:
        name: {{ . }}
    {{- end }}
    {{- with .Values.extraVolumes }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
{{- end -}}

{{/*
The alerting rules on eventsd_event_occurrences_total (the
PrometheusRule's spec; deploy/prometheus/eventsd-rules.yaml is it
rendered with the defaults).
*/}}
{{- define "eventsd.prometheusRuleGroups" -}}
{{- $v := .Values.prometheusRule }}
{{- $c := dict "m" .m "w" $v.window -}}
groups:
  - name: eventsd-events
    rules:
      - alert: EventsCrashLooping
        expr: {{ .by }} ({{ include "eventsd.occurrencesIn" (merge (dict "sel" `reason="BackOff"`) $c) }}) > {{ $v.backOffThreshold }}
        labels:
          severity: warning
          {{- with $v.additionalLabels }}{{ toYaml . | nindent 10 }}{{ end }}
        annotations:
          summary: {{`'{{ $labels.kind }} {{ $labels.namespace }}/{{ $labels.name }}: container restarts backing off'`}}
          description: {{ printf "'More than %v BackOff events (a container restarting, or an image pull, backing off) in %s: {{ $value }}.'" $v.backOffThreshold $v.window }}
          timeline: {{ .timeline | squote }}
      - alert: EventsOOMKilling
        expr: {{ .by }} ({{ include "eventsd.occurrencesIn" (merge (dict "sel" `reason="OOMKilling"`) $c) }}) > 0
        labels:
          severity: warning
          {{- with $v.additionalLabels }}{{ toYaml . | nindent 10 }}{{ end }}
        annotations:
          summary: {{`'{{ $labels.kind }} {{ $labels.namespace }}/{{ $labels.name }}: a process was OOM-killed'`}}
          description: {{ printf "'{{ $value }} OOMKilling events in %s.'" $v.window }}
          timeline: {{ .timeline | squote }}
      - alert: EventsFailedSchedulingPersists
        expr: {{ .by }} ({{ include "eventsd.occurrencesIn" (merge (dict "sel" `reason="FailedScheduling"`) $c) }}) > 0
        for: {{ $v.failedSchedulingFor }}
        labels:
          severity: warning
          {{- with $v.additionalLabels }}{{ toYaml . | nindent 10 }}{{ end }}
        annotations:
          summary: {{`'{{ $labels.kind }} {{ $labels.namespace }}/{{ $labels.name }}: cannot be scheduled'`}}
          description: {{ printf "'FailedScheduling events for %s.'" $v.failedSchedulingFor }}
          timeline: {{ .timeline | squote }}
      - alert: EventsImagePullFailing
        expr: {{ .by }} ({{ include "eventsd.occurrencesIn" (merge (dict "sel" `reason=~"ErrImagePull|ImagePullBackOff|Failed"`) $c) }}) > 0
        for: 5m
        labels:
          severity: warning
          {{- with $v.additionalLabels }}{{ toYaml . | nindent 10 }}{{ end }}
        annotations:
          summary: {{`'{{ $labels.kind }} {{ $labels.namespace }}/{{ $labels.name }}: image pulls (or containers) failing'`}}
          description: {{`'ErrImagePull, ImagePullBackOff or Failed events for 5 minutes.'`}}
          timeline: {{ .timeline | squote }}
      - alert: EventsNodeNotReady
        expr: {{ .by }} ({{ include "eventsd.occurrencesIn" (merge (dict "sel" `reason="NodeNotReady"`) $c) }}) > 0
        labels:
          severity: critical
          {{- with $v.additionalLabels }}{{ toYaml . | nindent 10 }}{{ end }}
        annotations:
          summary: {{`'{{ $labels.kind }} {{ $labels.name }}: NodeNotReady'`}}
          description: {{ printf "'{{ $value }} NodeNotReady events in %s.'" $v.window }}
          timeline: {{ .timeline | squote }}
      - alert: EventsFailedMount
        expr: {{ .by }} ({{ include "eventsd.occurrencesIn" (merge (dict "sel" `reason=~"FailedMount|FailedAttachVolume"`) $c) }}) > 0
        for: 5m
        labels:
          severity: warning
          {{- with $v.additionalLabels }}{{ toYaml . | nindent 10 }}{{ end }}
        annotations:
          summary: {{`'{{ $labels.kind }} {{ $labels.namespace }}/{{ $labels.name }}: volumes fail to mount'`}}
          description: {{`'FailedMount or FailedAttachVolume events for 5 minutes.'`}}
          timeline: {{ .timeline | squote }}
      - alert: EventsEvicted
        expr: {{ .by }} ({{ include "eventsd.occurrencesIn" (merge (dict "sel" `reason="Evicted"`) $c) }}) > 0
        labels:
          severity: warning
          {{- with $v.additionalLabels }}{{ toYaml . | nindent 10 }}{{ end }}
        annotations:
          summary: {{`'{{ $labels.kind }} {{ $labels.namespace }}/{{ $labels.name }}: evicted'`}}
          description: {{ printf "'{{ $value }} Evicted events in %s.'" $v.window }}
          timeline: {{ .timeline | squote }}
{{- end }}

{{/*
The occurrences of the series of .m{.sel} in the last .w (a window such
as 10m): their increase for the series that existed a window ago, and
their whole value for the series that appeared since (increase() does not see a
series' first value, so a label set's first occurrence would otherwise
go unseen).
*/}}
{{- define "eventsd.occurrencesIn" -}}
(increase({{ .m }}{ {{- .sel -}} }[{{ .w }}]) and {{ .m }}{ {{- .sel -}} } offset {{ .w }}) or ({{ .m }}{ {{- .sel -}} } unless {{ .m }}{ {{- .sel -}} } offset {{ .w }})
{{- end }}
