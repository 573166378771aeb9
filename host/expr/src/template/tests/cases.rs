//! The table of template cases: (template, expected output), rendered over the test data
//! at a pinned clock. Every library function appears at least once.

/// (template, expected output). Every library function appears at least once.
pub(super) const CASES: &[(&str, &str)] = &[
    // Language.
    ("plain text", "plain text"),
    ("{{ .metadata.name }}-{{ .spec.replicas }}", "shop-3"),
    ("{{ .spec.missing }}|{{ .spec.missing.deeper }}", "|"),
    ("{{ .spec.image | printf \"%s:%s\" .spec.tag }}", "1.27:nginx"),
    ("{{ if .spec.enabled }}on{{ else }}off{{ end }}", "on"),
    (
        "{{ if .spec.empty }}a{{ else if eq .spec.replicas 3 }}b{{ else }}c{{ end }}",
        "b",
    ),
    ("{{ with .spec.limits }}{{ .cpu }}{{ end }}", "500m"),
    ("{{ with .spec.nothing }}x{{ else }}none{{ end }}", "none"),
    (
        "{{ range $i, $t := .spec.tags }}{{ $i }}={{ $t }};{{ end }}",
        "0=a;1=b;2=c;",
    ),
    ("{{ range .spec.limits }}{{ . }},{{ end }}", "500m,1Gi,"),
    ("{{ range $k, $v := .spec.limits }}{{ $k }} {{ end }}", "cpu memory "),
    ("{{ range 3 }}{{ . }}{{ end }}", "012"),
    ("{{ range .spec.none }}x{{ else }}empty{{ end }}", "empty"),
    (
        "{{ range .spec.tags }}{{ if eq . \"b\" }}{{ break }}{{ end }}{{ . }}{{ end }}",
        "a",
    ),
    (
        "{{ range .spec.tags }}{{ if eq . \"b\" }}{{ continue }}{{ end }}{{ . }}{{ end }}",
        "ac",
    ),
    ("{{ $x := 1 }}{{ if true }}{{ $x = 2 }}{{ end }}{{ $x }}", "2"),
    ("{{ range .spec.tags }}{{ $.metadata.name }}{{ end }}", "shopshopshop"),
    ("{{ (index .spec.tags 1) | upper }}", "B"),
    ("{{ (.spec.limits).cpu }}", "500m"),
    ("a  {{- \" b \" -}}  c{{/* comment */}}", "a b c"),
    (
        "{{ and .spec.enabled .spec.image }}|{{ or .spec.empty \"fallback\" }}",
        "nginx|fallback",
    ),
    ("{{ and false (index .spec.tags 99) }}", "false"),
    (
        "{{ .spec.tags }} {{ .spec.limits }} {{ .spec.ratio }}",
        "[a b c] map[cpu:500m memory:1Gi] 2.5",
    ),
    ("{{ 'a' }} {{ 0x1F }} {{ 1e3 }} {{ -2 }} {{ nil }}", "97 31 1000 -2 "),
    // Go builtins.
    ("{{ not .spec.enabled }}", "false"),
    (
        "{{ eq .spec.replicas 1 2 3 }} {{ eq .spec.replicas \"3\" }}",
        "true true",
    ),
    ("{{ ne .spec.image \"nginx\" }}", "false"),
    (
        "{{ lt 1 2 }} {{ le 2 2 }} {{ gt \"b\" \"a\" }} {{ ge 1.5 2 }}",
        "true true true false",
    ),
    (
        "{{ len .spec.tags }} {{ len .spec.image }} {{ len .spec.none }}",
        "3 5 0",
    ),
    ("{{ index .spec.limits \"memory\" }} {{ index .spec.tags 2 }}", "1Gi c"),
    ("{{ slice .spec.tags 1 }} {{ slice .spec.image 0 2 }}", "[b c] ng"),
    ("{{ print 1 2 \"x\" 3 }}", "1 2x3"),
    (
        "{{ printf \"%d|%5s|%-4s|%05.1f|%q|%t|%x|%v|%+d\" 7 \"ab\" \"c\" 3.14159 \"q\" true 255 .spec.tags 5 }}",
        "7|   ab|c   |003.1|\"q\"|true|ff|[a b c]|+5",
    ),
    ("{{ printf \"%d %s\" 1 }}", "1 %!s(MISSING)"),
    ("{{ println \"a\" 1 }}", "a 1\n"),
    ("{{ html \"<a href='x'>\" }}", "&lt;a href=&#39;x&#39;&gt;"),
    ("{{ js \"it's <b>\" }}", "it\\'s \\u003Cb\\u003E"),
    ("{{ urlquery \"a b&c\" }}", "a+b%26c"),
    // Strings.
    (
        "{{ toLower \"ABC\" }} {{ lower \"X\" }} {{ toUpper \"abc\" }} {{ upper \"y\" }}",
        "abc x ABC Y",
    ),
    ("[{{ trimSpace \"  a  \" }}] [{{ trim \" b \" }}]", "[a] [b]"),
    (
        "{{ trimPrefix \"v\" .spec.version }} {{ trimSuffix \".2\" .spec.version }}",
        "1.4.2 v1.4",
    ),
    (
        "{{ hasPrefix \"ng\" .spec.image }} {{ hasSuffix \"y\" .spec.image }} {{ contains \"gin\" .spec.image }}",
        "true false true",
    ),
    ("{{ replace \".\" \"-\" .spec.version }}", "v1-4-2"),
    ("{{ split \",\" \"a,b\" }} {{ join \"+\" .spec.tags }}", "[a b] a+b+c"),
    ("{{ repeat 3 \"ab\" }}", "ababab"),
    (
        "{{ camelToKebab \"myFieldName\" }} {{ camelToKebab \"HTTPServer\" }}",
        "my-field-name http-server",
    ),
    ("{{ truncate 3 \"abcdef\" }}", "abc"),
    ("{{ quote \"a\" }} {{ title \"hello world\" }}", "\"a\" Hello World"),
    // Math.
    (
        "{{ add 1 2 3 }} {{ sub 10 4 }} {{ mul 2 3.5 }} {{ div 7 2 }} {{ div 7.0 2 }} {{ mod 7 3 }}",
        "6 6 7 3 3.5 1",
    ),
    (
        "{{ min 3 1 2 }} {{ max 3 1 2 }} {{ clamp 1 5 9 }} {{ abs -4 }}",
        "1 3 5 4",
    ),
    ("{{ .spec.replicas | add 1 }}", "4"),
    // Conditional.
    (
        "{{ .spec.missing | default \"nginx\" }} {{ .spec.image | default \"x\" }} {{ .spec.empty | default \"d\" }}",
        "nginx nginx d",
    ),
    (
        "{{ ternary \"yes\" \"no\" .spec.enabled }} {{ boolTernary false \"yes\" \"no\" }}",
        "yes no",
    ),
    (
        "{{ boolDefault true .spec.missing }} {{ boolDefault true \"no\" }}",
        "true false",
    ),
    ("{{ coalesce .spec.empty .spec.missing \"third\" }}", "third"),
    (
        "{{ empty .spec.empty }} {{ Empty .spec.tags }} {{ notEmpty .spec.tags }}",
        "true false true",
    ),
    // Type.
    (
        "{{ toInt \"42\" }} {{ toInt 3.9 }} {{ toFloat \"2.5\" }} {{ toBool \"yes\" }} {{ toString 5 }}",
        "42 3 2.5 true 5",
    ),
    (
        "{{ typeOf .spec.tags }} {{ typeOf .spec.ratio }} {{ typeOf .spec.replicas }} {{ typeOf nil }}",
        "list float int nil",
    ),
    (
        "{{ typeMap .spec }} {{ typeList .spec.tags }} {{ typeString .spec.image }} {{ typeNumber 1 }} {{ typeBool true }} {{ typeNull .x }}",
        "true true true true true true",
    ),
    ("{{ isScalar .spec.image }} {{ isComposite .spec.tags }}", "true true"),
    // Data.
    ("{{ toBase64 \"hi\" }} {{ fromBase64 \"aGk=\" }}", "aGk= hi"),
    ("{{ toJSON .spec.limits }}", "{\"cpu\":\"500m\",\"memory\":\"1Gi\"}"),
    ("{{ toJson .spec.limits }}", "{\"cpu\":\"500m\",\"memory\":\"1Gi\"}"),
    (
        "{{ sha256sum \"abc\" }}",
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
    ),
    ("{{ slugify \"Hello, World!\" }}", "hello-world"),
    (
        "{{ truncateName 10 \"a-very-long-name\" }} {{ truncateName \"short\" }}",
        "a-ve-6c158 short",
    ),
    (
        "{{ len (randomAlphanumeric 12) }} {{ len (randomHex 8) }} {{ len (randomBase64 6) }}",
        "12 8 8",
    ),
    // Time (now is Monday 2026-01-05 10:30 UTC).
    ("{{ now }}", "2026-01-05T10:30:00Z"),
    (
        "{{ timeAgo .metadata.creationTimestamp }} {{ timeSince .metadata.creationTimestamp }} {{ timeUntil .spec.expires }}",
        "2h ago 2h30m0s 2h0m0s",
    ),
    (
        "{{ timeFormat \"2006-01-02 15:04 Mon Jan\" }} {{ timeFormat \"DateOnly\" .spec.expires }} {{ timeFormat \"3:04PM\" }}",
        "2026-01-05 10:30 Mon Jan 2026-01-05 10:30AM",
    ),
    (
        "{{ isExpired .metadata.creationTimestamp }} {{ isExpired .spec.expires }}",
        "true false",
    ),
    (
        "{{ durationSeconds \"1h30m\" }} {{ durationSeconds \"2d\" }} {{ durationValid \"5x\" }}",
        "5400 172800 false",
    ),
    (
        "{{ durationAdd \"1d\" }} {{ durationAdd \"90m\" .spec.expires }}",
        "2026-01-06T10:30:00Z 2026-01-05T14:00:00Z",
    ),
    ("{{ weekday }} {{ weekend }}", "true false"),
    (
        "{{ timeInWindow \"09:00\" \"18:00\" }} {{ timeNotInWindow \"09:00\" \"18:00\" }} {{ timeInWindow \"22:00\" \"06:00\" }}",
        "true false false",
    ),
    ("{{ nextCron .spec.schedule }}", "2026-01-05T10:45:00Z"),
    // Cron.
    (
        "{{ cronToMap \"0 6 * * 1\" }}",
        "map[dom:* dow:1 hour:6 minute:0 month:*]",
    ),
    (
        "{{ cronFromMap (cronToMap \"@daily\") }} {{ cronFromAny \"@hourly\" }}",
        "0 0 * * * 0 * * * *",
    ),
    (
        "{{ cronNormalize \"0  6 *  * *\" }} | {{ cronDescribe \"30 6 * * 1-5\" }}",
        "0 6 * * * | at 06:30 on day-of-week 1-5",
    ),
    (
        "{{ cronValid \"* * *\" }} {{ cronField \"hour\" \"0 6 * * *\" }}",
        "false 6",
    ),
    (
        "{{ cronMinute .spec.schedule }} {{ cronHour .spec.schedule }} {{ cronDom .spec.schedule }} {{ cronMonth .spec.schedule }} {{ cronDow .spec.schedule }}",
        "*/15 * * * *",
    ),
    ("{{ cronExpr \"0\" \"12\" \"*\" \"*\" \"*\" }}", "0 12 * * *"),
    // Semver.
    (
        "{{ semverMajor .spec.version }}.{{ semverMinor .spec.version }}.{{ semverPatch .spec.version }} {{ semverValid \"1.2\" }} {{ semverValid \"x\" }}",
        "1.4.2 true false",
    ),
    (
        "{{ semverCompare \">=1.2 <2\" .spec.version }} {{ semverCompare \"^2\" .spec.version }} {{ semverCompare \"~1.3 || >=1.4\" .spec.version }}",
        "true false true",
    ),
    (
        "{{ semverBump \"minor\" .spec.version }} {{ semverConstraint \">=1\" }}",
        "1.5.0 true",
    ),
    // Network.
    (
        "{{ cidrContains .spec.cidr .spec.ip }} {{ cidrContains \"192.168.0.0/16\" .spec.ip }} {{ ipValid \"::1\" }} {{ ipIsPrivate .spec.ip }} {{ ipIsPrivate \"8.8.8.8\" }}",
        "true false true true false",
    ),
    // Quantities.
    (
        "{{ parseQuantity .spec.limits.cpu }} {{ parseQuantity .spec.limits.memory }} {{ formatQuantity 2147483648 }} {{ formatQuantity \"Mi\" 1048576 }} {{ sumQuantity \"500m\" \"1.5\" }}",
        "0.5 1073741824 2Gi 1Mi 2",
    ),
    // List/Map.
    (
        "{{ listHas \"b\" .spec.tags }} {{ listGet 1 .spec.tags }} {{ listGet -1 .spec.tags }} {{ listLen .spec.tags }}",
        "true b c 3",
    ),
    (
        "{{ mapGet \"cpu\" .spec.limits }} {{ mapKeys .spec.limits }} {{ mapValues .spec.limits }}",
        "500m [cpu memory] [500m 1Gi]",
    ),
    // Upstream's documented order (container first) reads the same; piping still works.
    (
        "{{ listHas .spec.tags \"b\" }} {{ listGet .spec.tags 1 }} {{ mapGet .spec.limits \"cpu\" }} {{ join (mapKeys .spec.limits) \", \" }} {{ .spec.tags | join \"+\" }} [{{ join .spec.none \",\" }}]",
        "true b 500m cpu, memory a+b+c []",
    ),
    (
        "{{ mapPick .spec.limits \"cpu\" }} {{ mapOmit .spec.limits \"cpu\" }} {{ toList 1 \"a\" }}",
        "map[cpu:500m] map[memory:1Gi] [1 a]",
    ),
    // Safe access and coercion.
    (
        "{{ get .children.deployment \"status\" \"readyReplicas\" }} {{ get .spec \"tags\" 0 }} [{{ get .spec \"no\" \"where\" }}]",
        "2 a []",
    ),
    (
        "{{ getOr .spec \"no\" \"dflt\" }} {{ getStringOr .spec \"empty\" \"s\" }} {{ getIntOr .spec \"replicas\" 0 }} {{ getBoolOr .spec \"enabled\" false }}",
        "dflt s 3 true",
    ),
    (
        "{{ asList .spec.image }} {{ asList nil }} {{ asMap .spec.image }} {{ asString 5 }}",
        "[nginx] [] map[] 5",
    ),
    // Kubernetes.
    (
        "{{ name . }}/{{ namespace . }} {{ resourceName . }} {{ resourceNamespace . }} {{ resourceUID . }} {{ resourceVersion . }}",
        "shop/web shop web u-1 42",
    ),
    (
        "{{ (meta .).name }} {{ labels . }} {{ (annotations .).team }} {{ (spec .).image }} {{ (status .).phase }} {{ phase . }}",
        "shop map[tier:gold] blue nginx Running Running",
    ),
    (
        "{{ creationTimestamp . }} {{ ownerKind . }}/{{ ownerName . }}",
        "2026-01-05T08:00:00Z Tenant/acme",
    ),
    (
        "{{ hasCondition \"Ready\" . }} {{ conditionReason \"Ready\" . }} {{ conditionMessage \"Ready\" . }} {{ hasCondition \"Synced\" . }}",
        "true Done all good false",
    ),
    (
        "{{ resourceExists . }} {{ resourceExists .children.nothing }} {{ isTerminating . }}",
        "true false false",
    ),
    (
        "{{ generation . }} {{ observedGeneration . }} {{ isSynced . }} {{ getAnnotation \"team\" . }} {{ hasAnnotation \"x\" . }}",
        "3 3 true blue false",
    ),
    // Replicas, services, containers, jobs.
    (
        "{{ replicasReady .children.deployment }} {{ allReplicasReady .children.deployment }} {{ rolloutComplete .children.deployment }}",
        "true true true",
    ),
    (
        "{{ desiredReplicas .children.deployment }} {{ readyReplicas .children.deployment }} {{ availableReplicas .children.deployment }} {{ updatedReplicas .children.deployment }}",
        "2 2 2 2",
    ),
    (
        "{{ serviceClusterIP .children.service }} {{ serviceNodePort .children.service }} {{ serviceLoadBalancerIP .children.service }} {{ serviceLoadBalancerHost .children.service }} {{ endpointsReady .children.endpoints }}",
        "10.96.0.10 30080 1.2.3.4 lb.example true",
    ),
    (
        "{{ containerImage .children.deployment }} {{ containerEnv \"MODE\" .children.deployment }} {{ containerPort .children.deployment }} {{ containerPortByName \"metrics\" .children.deployment }} {{ containerPorts .children.deployment }} {{ containerCount .children.deployment }}",
        "nginx:1.27 prod 80 9090 [80 9090] 1",
    ),
    (
        "{{ jobSucceeded .children.job }} {{ jobFailed .children.job }} {{ jobActive .children.job }}",
        "true false false",
    ),
    // Enrichment.
    (
        "{{ podCount .children.deployment }} {{ readyPodCount .children.deployment }} {{ podNames .children.deployment }} {{ podIPs .children.deployment }}",
        "2 1 [shop-1 shop-2] [10.0.0.1]",
    ),
    (
        "{{ hasCrashingPod .children.deployment }} {{ podMaxRestarts .children.deployment }}",
        "true 4",
    ),
    (
        "{{ hasWarnings .children.deployment }} {{ warningCount .children.deployment }} {{ firstWarning .children.deployment }} / {{ firstWarningReason .children.deployment }}",
        "true 1 restarting failed container / BackOff",
    ),
    (
        "{{ podContainerReasons .children.deployment }} {{ firstWarningMessage .children.deployment }} {{ deploymentReplicaSetCount .children.deployment }}/{{ deploymentReplicaSetCount .children.job }}",
        "[CrashLoopBackOff] restarting failed container 2/0",
    ),
    (
        "[{{ cronJobLastScheduleTime .children.cronjob }}] {{ cronJobLastScheduleTime .children.nightly }}",
        "[] 2026-01-05T02:00:00Z",
    ),
    // Enriched children.
    (
        "{{ replicaSetOwnerKind .children.replicaset }}/{{ replicaSetOwnerName .children.replicaset }} {{ deploymentReplicaSets .children.deployment }} [{{ oldDeploymentReplicaSets .children.deployment }}] {{ statefulSetPVCCount .children.statefulset }}",
        "Deployment/shop shop-1, shop-2 [shop-1] 2",
    ),
    (
        "{{ pvcBound .children.pvc }} {{ pvcPhase .children.pvc }} {{ pvcCapacity .children.pvc }} {{ pvcStorageClass .children.pvc }} {{ pvcAccessModes .children.pvc }} {{ pvcVolumeMode .children.pvc }} {{ pvcProvisioner .children.pvc }}",
        "true Bound 2Gi fast ReadWriteOnce Filesystem csi.example",
    ),
    (
        "{{ pvcStorageClassProvisioner .children.pvc }} {{ pvcStorageClassReclaimPolicy .children.pvc }} {{ pvReclaimPolicy .children.pvc }} [{{ pvAccessModes .children.pvc }}] {{ pvcBound .children.svc }}",
        "csi.example Delete Retain [ReadWriteOnce, ReadOnlyMany] false",
    ),
    (
        "{{ hasEndpoints .children.svc }} [{{ serviceEndpoints .children.svc }}] {{ serviceEndpointCount .children.svc }} {{ serviceFirstEndpoint .children.svc }} {{ backingPodCount .children.svc }} [{{ backingPodNames .children.svc }}] {{ hasEndpoints .children.pod }}",
        "true [10.0.0.1:80, 10.0.0.3:80] 2 10.0.0.1:80 2 [shop-a, shop-b] false",
    ),
    (
        "{{ podNode .children.pod }} {{ podNodeZone .children.pod }} {{ podNodeRegion .children.pod }} {{ podNodeInstanceType .children.pod }} [{{ podNode .children.svc }}]",
        "node-1 eu-1a eu-1 m5.large []",
    ),
    (
        "{{ hpaCurrentReplicas .children.hpa }}->{{ hpaDesiredReplicas .children.hpa }} in {{ hpaMinReplicas .children.hpa }}..{{ hpaMaxReplicas .children.hpa }} {{ hpaScaling .children.hpa }} {{ noteHPAScaling .children.hpa }} {{ hpaScalingActive .children.hpa }} {{ noteHPAScalingActive .children.hpa }} {{ hpaAbleToScale .children.hpa }} {{ hpaScalingLimited .children.hpa }} {{ hpaAtMax .children.hpa }}",
        "4->6 in 1..6 true true true true true false false",
    ),
    (
        "{{ hpaScaleTargetKind .children.hpa }}/{{ hpaScaleTargetName .children.hpa }} [{{ hpaMetricTypes .children.hpa }}] {{ cronJobActive .children.cj }} {{ cronJobActive .children.nightly }} {{ cronJobLastRunTime .children.cj }} {{ cronJobLastRunTime .children.nightly }} {{ cronJobLastSuccessTime .children.cj }}",
        "Deployment/shop-deployment [Resource, External] true false 2026-01-05T02:00:05Z 2026-01-05T02:00:00Z 2026-01-04T02:03:00Z",
    ),
    (
        "{{ ingressReady .children.ing }} {{ ingressHasLoadBalancer .children.svc }} {{ ingressIP .children.ing }} {{ ingressLoadBalancerIP .children.ing }} {{ ingressHost .children.ing }} {{ ingressClassName .children.ing }} [{{ ingressRules .children.ing }}] [{{ ingressTLSHosts .children.ing }}]",
        "true false 1.2.3.4 1.2.3.4 lb.example nginx [a.example, b.example] [a.example]",
    ),
    (
        "[{{ ingressLoadBalancerIPs .children.ing }}] [{{ ingressTLSSecrets .children.ing }}] {{ ingressTLSSecretCount .children.ing }}",
        "[1.2.3.4, lb.example] [a-cert] 1",
    ),
    (
        "{{ concat .spec.tags (split \",\" \"d,e\") }} {{ concat \"a-\" .spec.image \"-\" 2 }} {{ len (concat .spec.tags .nothing) }}",
        "[a b c d e] a-nginx-2 3",
    ),
    // Serve provenance.
    (
        "{{ getServeTarget . }} [{{ getServeAlias . }}] [{{ getServeSource . }}] {{ hasServeTarget . }} {{ hasServeAlias . }} {{ hasServeSource . }} {{ isDirectApply . }}",
        "site [] [] true false false false",
    ),
    // Prometheus.
    (
        "{{ promAboveThreshold 0.9 .prom }} {{ promBelowThreshold 0.9 .prom }} {{ promAboveThreshold 0.5 (toJSON .prom) }}",
        "true false true",
    ),
    (
        "{{ promValue .promv }} {{ promValue .proms }} {{ promSum .promv }} {{ promMax .promv }} {{ promSeriesCount .promv }} {{ promLabelValues \"pod\" .promv }} {{ promLabelValues .promv \"pod\" }} {{ promAboveThreshold .promv 1 }} [{{ promValue .nothing }}]",
        "2 7 7 5 2 [a b] [a b] true []",
    ),
    // Labels, annotations and status fields.
    (
        "{{ getLabel \"tier\" . }} {{ getLabel . \"tier\" }} {{ hasLabel \"tier\" . }} {{ hasLabel \"none\" . }} {{ getLabelInt \"size\" .children.node }} {{ getAnnotationInt \"team\" . }} {{ labelMatches . \"tier\" \"gold\" }} {{ labelMatches . \"tier\" \"silver\" }} {{ getAnnotation . \"team\" }}",
        "gold gold true false 4 0 true false blue",
    ),
    (
        "{{ getStatus \"phase\" . }} [{{ getStatus \"conditions\" . }}] {{ hasStatus \"phase\" . }} {{ hasStatus \"nothing\" . }} {{ resourceCPU .children.req }}/{{ resourceMemory .children.req }} [{{ resourceMemory . }}]",
        "Running [] true false 250m/64Mi []",
    ),
    // Validation.
    (
        "{{ isDNS1123Subdomain \"my-app.example.com\" }} {{ isDNS1123Subdomain \"My_App\" }} {{ isValidLabelKey \"platform.myorg.io/tier\" }} {{ isValidAnnotationKey \"bad key\" }} {{ isValidLabelValue \"\" }} {{ isValidEmail \"team@myorg.io\" }} {{ isValidURL \"ftp://x.io\" }} {{ isValidPort \"8080\" }} {{ isValidPort 70000 }} {{ isValidJSON \"{\\\"a\\\": 1}\" }} {{ isValidImageRef \"MyOrg/App\" }} {{ isValidGitRepository \"git@github.com:myorg/payments.git\" }} {{ isValidPort .spec.tags }}",
        "true false true false true true false true false true false true false",
    ),
    // Pods and warnings.
    (
        "{{ podCrashLoopDetected .children.deployment }} {{ podOOMKilledDetected .children.jobpods }} {{ podImagePullBackOffDetected .children.jobpods }} {{ podErrImagePullDetected .children.jobpods }} {{ podInvalidImageNameDetected .children.jobpods }} {{ podCreateContainerErrorDetected .children.jobpods }} {{ podRunContainerErrorDetected .children.jobpods }} {{ podPostStartHookErrorDetected .children.jobpods }} {{ podPreStartHookErrorDetected .children.jobpods }} {{ podErrorDetected .children.jobpods }}",
        "true true true false false false false false false false",
    ),
    (
        "{{ jobSucceededPodNames .children.jobpods }} {{ jobFailedPodNames .children.jobpods }} {{ jobActivePodNames .children.jobpods }} {{ jobFirstExitCode .children.jobpods }} {{ jobFirstExitCode .children.deployment }} {{ podPhases .children.jobpods }} {{ podNodes .children.jobpods }}",
        "[mig-0] [mig-1] [mig-2] 0 -1 [Succeeded Failed Pending] [node-1 node-2]",
    ),
    (
        "{{ (podByOrdinal 1 .children.jobpods).name }} {{ (podByOrdinal .children.jobpods 1).restartCount }} [{{ podByOrdinal 7 .children.jobpods }}] {{ podContainerState .children.jobpods 2 \"main\" }} [{{ podContainerState .children.jobpods 5 \"main\" }}] {{ podNodeName .children.pod }} {{ warningMessages .children.deployment }} {{ warningReasons .children.deployment }}",
        "mig-1 2 [] Waiting [] node-1 [restarting failed container] [BackOff]",
    ),
    // Nodes, StatefulSets, CronJobs.
    (
        "{{ nodeAllocatableCPU .children.node }} {{ nodeAllocatableMemory .children.node }} {{ nodeReady .children.node }} {{ nodeCondition \"MemoryPressure\" .children.node }} [{{ nodeCondition .children.node \"DiskPressure\" }}] {{ nodeTaints .children.node }} {{ statefulSetCurrentRevision .children.sts }}->{{ statefulSetUpdateRevision .children.sts }}",
        "3920m 15Gi true False [] [dedicated] db-6d8->db-7a2",
    ),
    (
        "{{ cronJobActiveCount .children.cj }} {{ cronJobNextScheduleTime .children.cj }} {{ cronJobLastJobName .children.cj }} {{ cronJobLastJobSucceeded .children.cj }} {{ cronJobLastSuccessfulJobName .children.cj }} [{{ cronJobNextScheduleTime .children.nightly }}]",
        "1 2026-01-06T02:00:00Z nightly-1 true nightly-0 []",
    ),
    // Strings, data, conditionals and quantities upstream's catalogue adds.
    (
        "{{ joinList \", \" .spec.tags }} {{ joinList .spec.tags \"-\" }} {{ domainHost \" https://www.acme.com/ \" }} {{ domainBare \"https://www.acme.com/\" }} {{ domainBare 5 }}| {{ repoSlug \"git@github.com:myorg/Payments-API.git\" }} {{ repoSlug \"myorg/orders\" }}",
        "a, b, c a-b-c www.acme.com acme.com | payments-api orders",
    ),
    (
        "{{ lookup \"b\" \"a\" 1 \"b\" 2 }} [{{ lookup \"z\" \"a\" 1 \"z\" }}] {{ eqTernary .spec.image \"nginx\" \"yes\" \"no\" }} {{ eqTernary 3 \"4\" \"same\" \"differ\" }} {{ len uuidv4 }} {{ subtractQuantity \"1Gi\" \"512Mi\" }} {{ subtractQuantity \"100m\" \"200m\" }}",
        "2 [] yes differ 36 512Mi -100m",
    ),
];
