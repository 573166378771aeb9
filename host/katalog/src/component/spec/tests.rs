use super::*;

const NO_POLICY: &ComponentDeletion = &ComponentDeletion {
    timeout: None,
    on_timeout: None,
};

fn declared<'a>(component: &'a str, sha256: Option<&'a str>, limits: &'a ComponentLimits) -> Declared<'a> {
    Declared {
        component,
        sha256,
        limits,
        deletion: NO_POLICY,
        instances: &ComponentInstances {
            reuse: None,
            max_calls: None,
            memory_high_water: None,
        },
        capabilities: &[],
        run_first: false,
        args: None,
        service_account: None,
        files: &[],
        rollout: None,
    }
}

#[test]
fn file_grants_resolve_against_the_katalog_and_mount_at_plain_paths() {
    let limits = ComponentLimits::default();
    let grant = |path: &str, mount: Option<&str>| crate::model::FileGrant {
        path: path.into(),
        mount_path: mount.map(String::from),
    };
    let grants = [grant("policies", None), grant("data", Some("/data/v1"))];
    let spec = Spec::compile(
        World::Hook,
        Declared {
            files: &grants,
            ..declared("a.wasm", None, &limits)
        },
        Path::new("/k"),
    )
    .unwrap();
    assert_eq!(
        spec.files[0],
        Mount {
            host: "/k/policies".into(),
            guest: "/files".into(),
            folder: "/k".into(),
        }
    );
    assert_eq!(spec.files[1].guest, "/data/v1");
    for (bad, why) in [
        (vec![grant("p", Some("relative"))], "mountPath"),
        (vec![grant("p", Some("/a/../b"))], "plain names"),
        (vec![grant("p", Some("/"))], "mountPath"),
        (vec![grant("p", None), grant("q", None)], "given twice"),
        (vec![grant(" ", None)], "files[0].path"),
        (vec![grant("/etc", None)], "is absolute"),
        (vec![grant("../secrets", None)], "climbs out"),
        (vec![grant("policies/../../etc", None)], "climbs out"),
    ] {
        let error = Spec::compile(
            World::Hook,
            Declared {
                files: &bad,
                ..declared("a.wasm", None, &limits)
            },
            Path::new("/k"),
        )
        .unwrap_err();
        assert!(error.to_string().contains(why), "{error}");
    }
}

#[test]
fn a_grant_that_leads_out_through_a_symlink_is_refused() {
    let dir = std::env::temp_dir().join(format!("grant-{}", std::process::id()));
    let katalog = dir.join("katalog");
    std::fs::create_dir_all(katalog.join("inside")).unwrap();
    let _ = std::fs::remove_file(katalog.join("escape"));
    std::os::unix::fs::symlink("/etc", katalog.join("escape")).unwrap();
    assert_eq!(outside(&katalog, Path::new("inside")), None);
    let why = outside(&katalog, Path::new("escape")).unwrap();
    assert!(why.contains("leads outside the Katalog's folder (to /etc)"), "{why}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_service_account_is_a_name_or_namespace_and_name() {
    let own = ServiceAccount::parse("runner").unwrap();
    assert_eq!(
        own.user(Some("team-a")).as_deref(),
        Some("system:serviceaccount:team-a:runner")
    );
    assert_eq!(
        own.user(None),
        None,
        "a cluster-scoped CR has no namespace to find it in"
    );
    let fixed = ServiceAccount::parse("ops/runner").unwrap();
    assert_eq!(
        fixed.user(Some("team-a")).as_deref(),
        Some("system:serviceaccount:ops:runner")
    );
    for bad in ["", "a/b/c", "Runner", "ns/", "/x", "-x"] {
        assert!(ServiceAccount::parse(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn paths_resolve_against_the_katalog_and_defaults_are_safe() {
    let limits = ComponentLimits::default();
    let spec = Spec::compile(World::Hook, declared("hook.wasm", None, &limits), Path::new("/k")).unwrap();
    assert_eq!(spec.source, Source::Path(PathBuf::from("/k/hook.wasm")));
    assert_eq!(spec.limits, Limits::default());
    assert_eq!(*spec.grants, Grants::default());
}

#[test]
fn limits_parse_and_are_bounded() {
    let limits = ComponentLimits {
        timeout: Some("500ms".into()),
        memory: Some("16Mi".into()),
        result_size: Some("64Ki".into()),
        kube_calls: Some(3),
        kube_bytes: Some("1Mi".into()),
        children: Some(5),
        events: Some(2),
        log_bytes: Some("4Ki".into()),
        apply_timeout: Some("10s".into()),
        fuel: Some(5_000_000),
    };
    let spec = Spec::compile(World::Hook, declared("a.wasm", None, &limits), Path::new(".")).unwrap();
    assert_eq!(
        spec.limits,
        Limits {
            timeout: Duration::from_millis(500),
            memory: 16 << 20,
            result_size: 64 << 10,
            kube_calls: 3,
            kube_bytes: 1 << 20,
            children: 5,
            events: 2,
            log_bytes: 4 << 10,
            apply_timeout: Duration::from_secs(10),
            fuel: Some(5_000_000),
        }
    );
    for (field, limits) in [
        (
            "limits.children",
            ComponentLimits {
                children: Some(5000),
                ..Default::default()
            },
        ),
        (
            "limits.fuel",
            ComponentLimits {
                fuel: Some(0),
                ..Default::default()
            },
        ),
        (
            "limits.events",
            ComponentLimits {
                events: Some(101),
                ..Default::default()
            },
        ),
        (
            "limits.kubeBytes",
            ComponentLimits {
                kube_bytes: Some("1Ti".into()),
                ..Default::default()
            },
        ),
        (
            "limits.applyTimeout",
            ComponentLimits {
                apply_timeout: Some("1h".into()),
                ..Default::default()
            },
        ),
    ] {
        let error = Spec::compile(World::Hook, declared("a.wasm", None, &limits), Path::new(".")).unwrap_err();
        assert!(error.to_string().starts_with(field), "{field}: {error}");
    }
    let huge = ComponentLimits {
        memory: Some("8Gi".into()),
        ..Default::default()
    };
    let error = Spec::compile(World::Hook, declared("a.wasm", None, &huge), Path::new(".")).unwrap_err();
    assert!(error.to_string().starts_with("limits.memory"), "{error}");
    let never = ComponentLimits {
        timeout: Some("0s".into()),
        ..Default::default()
    };
    let error = Spec::compile(World::Hook, declared("a.wasm", None, &never), Path::new(".")).unwrap_err();
    assert!(error.to_string().starts_with("limits.timeout"), "{error}");
}

#[test]
fn the_deletion_policy_blocks_by_default_and_names_a_bad_value() {
    let limits = ComponentLimits::default();
    let spec = Spec::compile(World::Hook, declared("a.wasm", None, &limits), Path::new(".")).unwrap();
    assert_eq!(spec.deletion, Deletion::default());
    assert!(!spec.deletion.release);
    let release = ComponentDeletion {
        timeout: Some("30s".into()),
        on_timeout: Some("release".into()),
    };
    let spec = Spec::compile(
        World::Hook,
        Declared {
            deletion: &release,
            ..declared("a.wasm", None, &limits)
        },
        Path::new("."),
    )
    .unwrap();
    assert_eq!(
        spec.deletion,
        Deletion {
            timeout: Duration::from_secs(30),
            release: true
        }
    );
    let wrong = ComponentDeletion {
        timeout: None,
        on_timeout: Some("ignore".into()),
    };
    let error = Spec::compile(
        World::Hook,
        Declared {
            deletion: &wrong,
            ..declared("a.wasm", None, &limits)
        },
        Path::new("."),
    )
    .unwrap_err();
    assert!(error.to_string().starts_with("deletion.onTimeout"), "{error}");
}

#[test]
fn urls_need_a_well_formed_pin() {
    let limits = ComponentLimits::default();
    let url = "https://example.com/hook.wasm";
    let error = Spec::compile(World::Hook, declared(url, None, &limits), Path::new(".")).unwrap_err();
    assert!(error.to_string().contains("needs a sha256 pin"), "{error}");
    let error = Spec::compile(World::Hook, declared(url, Some("abc"), &limits), Path::new(".")).unwrap_err();
    assert!(error.to_string().starts_with("sha256"), "{error}");
    let pin = "AB".repeat(32);
    let spec = Spec::compile(World::Hook, declared(url, Some(&pin), &limits), Path::new(".")).unwrap();
    assert_eq!(spec.sha256.as_deref(), Some("ab".repeat(32).as_str()));
    let error = Spec::compile(World::Hook, declared("s3://x/y", None, &limits), Path::new(".")).unwrap_err();
    assert!(error.to_string().contains("unsupported scheme"), "{error}");
    let reference = format!("oci://ghcr.io/acme/hook:v1@sha256:{}", "a".repeat(64));
    let spec = Spec::compile(World::Hook, declared(&reference, None, &limits), Path::new(".")).unwrap();
    assert!(matches!(&spec.source, Source::Oci(oci) if oci.repository == "acme/hook"));
    assert_eq!(spec.source.to_string(), reference);
}

#[test]
fn instances_are_fresh_by_default_and_warm_ones_get_bounds_within_the_memory_limit() {
    let limits = ComponentLimits {
        memory: Some("32Mi".into()),
        ..ComponentLimits::default()
    };
    let compile = |instances: ComponentInstances| {
        Spec::compile(
            World::Hook,
            Declared {
                instances: &instances,
                ..declared("a.wasm", None, &limits)
            },
            Path::new("."),
        )
        .map(|spec| spec.instances)
        .map_err(String::from)
    };
    let with = |reuse: Option<&str>, max_calls: Option<u32>, high_water: Option<&str>| ComponentInstances {
        reuse: reuse.map(String::from),
        max_calls,
        memory_high_water: high_water.map(String::from),
    };
    assert_eq!(compile(with(None, None, None)), Ok(Instances::Fresh));
    assert_eq!(compile(with(Some("fresh"), None, None)), Ok(Instances::Fresh));
    assert_eq!(
        compile(with(Some("warm"), None, None)),
        Ok(Instances::Warm(Warm {
            max_calls: 1000,
            high_water: 16 << 20
        })),
        "half of limits.memory by default"
    );
    assert_eq!(
        compile(with(Some("warm"), Some(50), Some("8Mi"))),
        Ok(Instances::Warm(Warm {
            max_calls: 50,
            high_water: 8 << 20
        }))
    );
    for (bad, names) in [
        (with(Some("hot"), None, None), "instances.reuse: \"hot\""),
        (
            with(None, Some(10), None),
            "instances: maxCalls and memoryHighWater apply to warm instances",
        ),
        (with(Some("warm"), Some(0), None), "instances.maxCalls: 0"),
        (
            with(Some("warm"), None, Some("64Mi")),
            "instances.memoryHighWater: \"64Mi\"",
        ),
        (with(Some("warm"), None, Some("lots")), "instances.memoryHighWater"),
    ] {
        let error = compile(bad).unwrap_err();
        assert!(error.to_string().starts_with(names), "{error}");
    }
}

#[test]
fn a_rollout_takes_its_defaults_and_names_the_field_past_its_bounds() {
    let limits = ComponentLimits::default();
    let compile = |rollout: ComponentRollout| {
        Spec::compile(
            World::Hook,
            Declared {
                rollout: Some(&rollout),
                ..declared("a.wasm", None, &limits)
            },
            Path::new("/k"),
        )
        .map(|spec| spec.rollout)
        .map_err(String::from)
    };
    assert_eq!(
        compile(ComponentRollout::default()).unwrap(),
        Some(Rollout {
            share: 10,
            promote_after: Duration::from_secs(600),
            max_error_percent: 10,
            min_reconciles: 5,
        })
    );
    let spec = Spec::compile(World::Hook, declared("a.wasm", None, &limits), Path::new("/k")).unwrap();
    assert_eq!(spec.rollout, None, "without one, a new version serves every CR at once");
    for (rollout, error) in [
        (
            ComponentRollout {
                share: Some(100),
                ..Default::default()
            },
            "rollout.share: 100 is not a percent between 1 and 99",
        ),
        (
            ComponentRollout {
                promote_after: Some("0s".into()),
                ..Default::default()
            },
            "rollout.promoteAfter: \"0s\" must be above 0 and at most 7 days",
        ),
        (
            ComponentRollout {
                max_error_percent: Some(101),
                ..Default::default()
            },
            "rollout.maxErrorPercent: 101 is not a percent between 0 and 100",
        ),
        (
            ComponentRollout {
                min_reconciles: Some(0),
                ..Default::default()
            },
            "rollout.minReconciles: 0 is not between 1 and 10000",
        ),
    ] {
        assert_eq!(compile(rollout).unwrap_err(), error);
    }
}
