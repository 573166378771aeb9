use super::*;

#[test]
fn contains_ignores_fields_the_server_added_but_not_values_we_manage() {
    let live = json!({"spec": {"replicas": 3, "strategy": {"type": "RollingUpdate"}, "template": {"spec": {"containers": [{"name": "a", "image": "x", "terminationMessagePath": "/dev/t"}]}}}});
    assert!(contains(
        &live,
        &json!({"spec": {"replicas": 3, "template": {"spec": {"containers": [{"name": "a", "image": "x"}]}}}})
    ));
    assert!(!contains(&live, &json!({"spec": {"replicas": 4}})));
    assert!(!contains(
        &live,
        &json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "y"}]}}}})
    ));
    assert!(!contains(&live, &json!({"spec": {"paused": true}})));
}

#[test]
fn a_secret_compares_through_its_stored_form() {
    let desired = json!({"kind": "Secret", "stringData": {"password": "hunter2"}});
    let live = json!({"kind": "Secret", "data": {"password": "aHVudGVyMg=="}});
    assert!(contains(&live, &comparable(&desired)));
}

#[test]
fn only_a_cr_with_no_status_counts_as_never_reconciled() {
    assert!(never_reconciled(&json!({"metadata": {"name": "a"}})));
    assert!(never_reconciled(&json!({"status": null})));
    assert!(never_reconciled(&json!({"status": {}})));
    assert!(!never_reconciled(&json!({"status": {"observedGeneration": 1}})));
    // Written by the runtime through the object itself (no status subresource).
    assert!(!never_reconciled(&json!({"status": {"conditions": []}})));
}
