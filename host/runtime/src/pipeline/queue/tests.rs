use super::*;
use crate::testing::queue_item as item;

fn event(key: &str, id: u64) -> QueueItem {
    QueueItem {
        event_id: Some(id),
        ..item(key)
    }
}

fn with(bits: u16) -> Payload {
    Payload {
        sentinels: SentinelBits(bits),
        ..Payload::default()
    }
}

/// Polls once: a ready item or nothing, without letting paused time move.
async fn next_now(queue: &WorkQueue) -> Option<Lease> {
    use futures::FutureExt;
    tokio::task::yield_now().await;
    queue.next().now_or_never().flatten()
}

#[tokio::test(start_paused = true)]
async fn queue_should_coalesce_the_same_item_and_merge_sentinels() {
    let queue = WorkQueue::new();
    assert_eq!(queue.add(item("ns/a"), with(0b01)), Added::Queued);
    assert_eq!(queue.add(item("ns/a"), with(0b10)), Added::Coalesced);
    assert_eq!(queue.depth(), 1);
    let lease = queue.next().await.unwrap();
    assert_eq!(lease.payload.sentinels, SentinelBits(0b11));
    queue.done(lease, Outcome::Success);
    assert!(next_now(&queue).await.is_none());
}

#[tokio::test(start_paused = true)]
async fn a_change_is_timed_from_its_first_sighting_through_retries_but_not_past_its_run() {
    let seen = |at: Instant| Payload {
        seen: Some(at),
        ..Payload::default()
    };
    let queue = WorkQueue::new();
    let first = Instant::now();
    tokio::time::advance(Duration::from_millis(30)).await;
    queue.add(item("ns/a"), seen(Instant::now()));
    queue.add(item("ns/a"), seen(first));
    let lease = queue.next().await.unwrap();
    assert_eq!(lease.payload.seen, Some(first), "the earliest of the coalesced");
    // It failed: its retry is the same change, still timed from its sighting.
    queue.done(lease, Outcome::Retry);
    tokio::time::advance(Duration::from_secs(1)).await;
    let retry = queue.next().await.unwrap();
    assert_eq!(retry.payload.seen, Some(first));
    assert!(retry.payload.started, "its wait was timed at its first run");
    // Its write met a newer CR: still not done, still the same change.
    queue.done(retry, Outcome::Unfinished(Duration::from_millis(200)));
    tokio::time::advance(Duration::from_millis(200)).await;
    let retry = queue.next().await.unwrap();
    assert_eq!(retry.payload.seen, Some(first));
    // Handled, then requeued: the requeue is no change of anyone's.
    queue.done(retry, Outcome::RequeueAfter(Duration::from_secs(5)));
    tokio::time::advance(Duration::from_secs(5)).await;
    let requeued = queue.next().await.unwrap();
    assert_eq!(requeued.payload.seen, None);
    queue.done(requeued, Outcome::Success);
}

#[tokio::test(start_paused = true)]
async fn a_quiet_namespace_waits_for_one_item_of_a_noisy_ones_backlog_not_all_of_it() {
    let queue = WorkQueue::new();
    for i in 0..3000 {
        queue.add(item(&format!("noisy/{i}")), with(0));
    }
    let running = queue.next().await.unwrap();
    assert_eq!(running.item.key, "noisy/0");
    queue.add(item("quiet/new"), with(0));
    let taken: Vec<String> = [queue.next().await.unwrap(), queue.next().await.unwrap()]
        .into_iter()
        .map(|lease| lease.item.key)
        .collect();
    assert_eq!(taken, ["noisy/1", "quiet/new"]);
    queue.done(running, Outcome::Success);
    assert_eq!(queue.depth(), 2998, "the backlog goes on");
}

#[tokio::test(start_paused = true)]
async fn a_namespace_at_its_cap_over_every_crd_waits_while_others_run() {
    use orkestra_katalog::compile::{TenantLimits, TenantRules};
    let limits = TenantLimits {
        reconciles: 2,
        api: None,
        wasm_calls: 16,
        wasm_cpu: 0.5,
    };
    let tenants = Arc::new(Tenants::new(TenantRules {
        default: limits,
        namespaces: Default::default(),
    }));
    // Two CRDs' queues, one runtime.
    let (websites, databases) = (
        WorkQueue::new().sharing(tenants.clone(), "websites".into()),
        WorkQueue::new().sharing(tenants.clone(), "databases".into()),
    );
    websites.add(item("noisy/site1"), with(0));
    websites.add(item("noisy/site2"), with(0));
    for key in ["noisy/db1", "noisy/db2", "quiet/db"] {
        databases.add(item(key), with(0));
    }
    let sites = [websites.next().await.unwrap(), websites.next().await.unwrap()];
    // The noisy namespace is at its cap; the databases still run one of its CRs.
    let db1 = next_now(&databases).await.expect("one of each namespace in each CRD");
    assert_eq!(db1.item.key, "noisy/db1");
    let quiet = next_now(&databases).await.expect("another namespace runs");
    assert_eq!(quiet.item.key, "quiet/db");
    assert!(next_now(&databases).await.is_none(), "noisy/db2 waits for room");
    // The websites' reconciles end: the databases' waiting worker takes noisy/db2 once
    // the namespace is under its cap.
    let waiting = tokio::spawn({
        let databases = databases.clone();
        async move { databases.next().await }
    });
    tokio::task::yield_now().await;
    let [site1, site2] = sites;
    websites.done(site1, Outcome::Success);
    tokio::task::yield_now().await;
    assert!(!waiting.is_finished(), "two of two running still");
    websites.done(site2, Outcome::Success);
    let db2 = waiting.await.unwrap().expect("a lease");
    assert_eq!(db2.item.key, "noisy/db2");
    assert_eq!(tenants.reconciling(), [("noisy".into(), 2), ("quiet".into(), 1)]);
    for lease in [db1, db2, quiet] {
        databases.done(lease, Outcome::Success);
    }
}

#[tokio::test(start_paused = true)]
async fn an_item_added_while_running_runs_once_more_after() {
    let queue = WorkQueue::new();
    queue.add(item("ns/a"), with(0));
    let lease = queue.next().await.unwrap();
    assert_eq!(queue.add(item("ns/a"), with(1)), Added::Coalesced);
    assert_eq!(queue.add(item("ns/a"), with(2)), Added::Coalesced);
    assert!(next_now(&queue).await.is_none(), "never two runs of one key at once");
    queue.done(lease, Outcome::Success);
    let again = next_now(&queue).await.expect("the pending run");
    assert_eq!(again.payload.sentinels, SentinelBits(3));
    queue.done(again, Outcome::Success);
    assert!(next_now(&queue).await.is_none(), "at most one pending run");
}

#[tokio::test(start_paused = true)]
async fn event_aware_items_stay_separate_but_one_key_runs_at_a_time() {
    let queue = WorkQueue::new();
    queue.add(event("ns/a", 1), with(1));
    queue.add(event("ns/a", 2), with(2));
    queue.add(event("ns/b", 3), with(4));
    assert_eq!(queue.depth(), 3);
    let first = queue.next().await.unwrap();
    assert_eq!(first.item.event_id, Some(1));
    let other = next_now(&queue).await.unwrap();
    assert_eq!(other.item.key, "ns/b", "the second event of ns/a waits for the first");
    queue.done(first, Outcome::Success);
    let second = next_now(&queue).await.unwrap();
    assert_eq!(
        (second.item.event_id, second.payload.sentinels),
        (Some(2), SentinelBits(2))
    );
}

#[tokio::test(start_paused = true)]
async fn failures_back_off_exponentially_and_success_resets() {
    let queue = WorkQueue::new();
    queue.add(item("ns/a"), with(0));
    for failures in 1..=4u32 {
        let lease = queue.next().await.unwrap();
        assert_eq!(lease.failures, failures - 1);
        queue.done(lease, Outcome::Retry);
        let wait = backoff(failures);
        tokio::time::advance(wait - Duration::from_micros(500)).await;
        assert!(next_now(&queue).await.is_none(), "not before {wait:?}");
        tokio::time::advance(Duration::from_millis(1)).await;
    }
    let lease = queue.next().await.unwrap();
    assert_eq!(lease.failures, 4);
    queue.done(lease, Outcome::Success);
    queue.add(item("ns/a"), with(0));
    assert_eq!(queue.next().await.unwrap().failures, 0);
    assert_eq!(backoff(1), Duration::from_millis(5));
    assert_eq!(backoff(2), Duration::from_millis(10));
    assert_eq!(backoff(40), BACKOFF_MAX);
}

#[tokio::test(start_paused = true)]
async fn a_hot_loop_is_slowed_and_a_calm_run_resets_it() {
    let queue = WorkQueue::new();
    queue.add(item("ns/a"), with(0));
    for _ in 0..HOT_STREAK {
        let lease = next_now(&queue).await.expect("quick requeues run at once at first");
        queue.done(lease, Outcome::RequeueAfter(Duration::ZERO));
    }
    for streak in HOT_STREAK + 1..=HOT_STREAK + 8 {
        let lease = next_now(&queue).await.unwrap();
        queue.done(lease, Outcome::RequeueAfter(Duration::ZERO));
        let wait = hot_delay(streak);
        tokio::time::advance(wait - Duration::from_millis(1)).await;
        assert!(
            next_now(&queue).await.is_none(),
            "quick requeue {streak} waits {wait:?}"
        );
        tokio::time::advance(Duration::from_millis(2)).await;
    }
    assert_eq!(hot_delay(HOT_STREAK + 1), Duration::from_secs(1));
    assert_eq!(hot_delay(HOT_STREAK + 8), HOT_MAX);
    // A requeue that is not quick, or a plain success, ends the streak.
    let lease = next_now(&queue).await.unwrap();
    let calm = HOT_REQUEUE + Duration::from_secs(1);
    queue.done(lease, Outcome::RequeueAfter(calm));
    tokio::time::advance(calm).await;
    let lease = next_now(&queue).await.unwrap();
    queue.done(lease, Outcome::RequeueAfter(Duration::ZERO));
    assert!(next_now(&queue).await.is_some(), "the streak starts over");
}

#[tokio::test(start_paused = true)]
async fn a_delayed_add_keeps_the_earlier_time() {
    let queue = WorkQueue::new();
    queue.add_after(item("ns/a"), with(0), Duration::from_secs(10));
    queue.add_after(item("ns/a"), with(0), Duration::from_secs(60));
    tokio::time::advance(Duration::from_secs(9)).await;
    assert!(next_now(&queue).await.is_none());
    tokio::time::advance(Duration::from_secs(2)).await;
    assert!(next_now(&queue).await.is_some());
}

#[tokio::test(start_paused = true)]
async fn requeue_after_success_schedules_the_next_run() {
    let queue = WorkQueue::new();
    queue.add(item("ns/a"), with(0));
    let lease = queue.next().await.unwrap();
    queue.done(lease, Outcome::RequeueAfter(Duration::from_secs(30)));
    tokio::time::advance(Duration::from_secs(29)).await;
    assert!(next_now(&queue).await.is_none());
    tokio::time::advance(Duration::from_secs(2)).await;
    assert!(next_now(&queue).await.is_some());
}

#[tokio::test(start_paused = true)]
async fn a_bounded_add_never_exceeds_the_limit_but_still_coalesces() {
    let queue = WorkQueue::new();
    for i in 0..3 {
        assert_eq!(queue.add_bounded(item(&format!("ns/{i}")), with(0), 3), Added::Queued);
    }
    assert_eq!(queue.add_bounded(item("ns/9"), with(0), 3), Added::AtLimit);
    assert_eq!(queue.add_bounded(item("ns/0"), with(1), 3), Added::Coalesced);
    assert_eq!(queue.depth(), 3);
}

#[tokio::test(start_paused = true)]
async fn shutdown_wakes_waiting_workers_and_refuses_new_work() {
    let queue = WorkQueue::new();
    let waiting = tokio::spawn({
        let queue = queue.clone();
        async move { queue.next().await.is_none() }
    });
    tokio::task::yield_now().await;
    queue.shutdown();
    assert!(waiting.await.unwrap(), "a waiting worker gets None");
    assert_eq!(queue.add(item("ns/a"), with(0)), Added::Closed);
}
fn background() -> Payload {
    Payload {
        class: Class::Background,
        ..Payload::default()
    }
}

#[tokio::test(start_paused = true)]
async fn a_users_change_runs_before_the_initial_list_and_a_requeue_is_background_work() {
    let queue = WorkQueue::new();
    for i in 0..50 {
        queue.add(item(&format!("ns/listed-{i}")), background());
    }
    queue.add(item("ns/new"), with(0));
    assert_eq!(next_now(&queue).await.unwrap().item.key, "ns/new");
    // Requeued, it is background work: a later user change goes first.
    let listed = next_now(&queue).await.unwrap();
    assert_eq!(listed.item.key, "ns/listed-0");
    queue.done(listed, Outcome::RequeueAfter(Duration::ZERO));
    queue.add(item("ns/changed"), with(0));
    assert_eq!(next_now(&queue).await.unwrap().item.key, "ns/changed");
    // A user's change to a queued background item promotes it.
    queue.add(item("ns/listed-40"), with(0));
    assert_eq!(next_now(&queue).await.unwrap().item.key, "ns/listed-40");
    assert_eq!(next_now(&queue).await.unwrap().item.key, "ns/listed-1");
}

/// A sustained stream of user changes, more than the workers keep up with: background
/// work still runs, within the aging bound plus one run.
#[tokio::test(start_paused = true)]
async fn background_work_waits_at_most_its_aging_under_sustained_user_changes() {
    let aging = Duration::from_secs(2);
    let queue = WorkQueue::with_rules(FlowRules {
        aging,
        ..FlowRules::default()
    });
    let run = Duration::from_millis(10);
    queue.add(item("ns/resync"), background());
    let started = Instant::now();
    let mut user = 0;
    let waited = loop {
        // Two user changes arrive per run: the backlog only grows.
        for _ in 0..2 {
            queue.add(item(&format!("ns/user-{user}")), with(0));
            user += 1;
        }
        let lease = next_now(&queue).await.unwrap();
        if lease.item.key == "ns/resync" {
            break started.elapsed();
        }
        tokio::time::advance(run).await;
        queue.done(lease, Outcome::Success);
        assert!(started.elapsed() < aging * 2, "the background item never ran");
    };
    assert!(waited >= aging - run, "user changes went first: ran after {waited:?}");
    assert!(waited <= aging + run, "within its aging: ran after {waited:?}");
}

#[tokio::test(start_paused = true)]
async fn flows_by_label_group_what_the_enqueue_path_named_and_by_none_is_first_in_first_out() {
    let labelled = WorkQueue::with_rules(FlowRules {
        by: FlowBy::Label("team".into()),
        ..FlowRules::default()
    });
    let team = |name: &str| Payload {
        flow: Some(name.into()),
        ..Payload::default()
    };
    for (key, flow) in [("a/1", "red"), ("b/1", "red"), ("a/2", "red"), ("c/1", "blue")] {
        labelled.add(item(key), team(flow));
    }
    let mut order = Vec::new();
    while let Some(lease) = next_now(&labelled).await {
        order.push(lease.item.key.clone());
        labelled.done(lease, Outcome::Success);
    }
    assert_eq!(
        order,
        ["a/1", "c/1", "b/1", "a/2"],
        "red and blue take turns, whatever the namespace"
    );
    let mut flows: Vec<_> = labelled
        .flows(10)
        .into_iter()
        .map(|f| (f.flow, f.stats.served))
        .collect();
    flows.sort();
    assert_eq!(flows, [("blue".into(), 1), ("red".into(), 3)]);

    let fifo = WorkQueue::with_rules(FlowRules {
        by: FlowBy::None,
        aging: Duration::ZERO,
        ..FlowRules::default()
    });
    for key in ["noisy/1", "noisy/2", "quiet/1"] {
        fifo.add(item(key), with(0));
    }
    let mut order = Vec::new();
    while let Some(lease) = next_now(&fifo).await {
        order.push(lease.item.key.clone());
        fifo.done(lease, Outcome::Success);
    }
    assert_eq!(order, ["noisy/1", "noisy/2", "quiet/1"]);
}
