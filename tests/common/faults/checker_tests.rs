//! The checker shown to catch what it is for: each invariant on a small
//! hand-made history that breaks it (and on the same history mended, where
//! it finds nothing).

use serde_json::{Value, json};

use super::checker::{self, Params};
use super::history::{Event, History, Kind, Op, Outcome, What};

/// A hand-made history.
#[derive(Default)]
struct H(History);

impl H {
    fn op(
        &mut self,
        kind: Kind,
        node: usize,
        at: (u64, u64),
        outcome: Outcome,
        value: Value,
    ) -> &mut Op {
        let id = self.0.ops.len() as u64 + 1;
        self.0.ops.push(Op {
            id,
            worker: "hand".into(),
            kind,
            node: Some(node),
            invoke: at.0,
            complete: at.1,
            outcome,
            principal: "alice".into(),
            task: None,
            session: None,
            uri: None,
            value,
        });
        self.0.ops.last_mut().expect("just pushed")
    }

    fn task(&mut self, kind: Kind, node: usize, at: (u64, u64), task: &str, value: Value) -> u64 {
        let op = self.op(kind, node, at, Outcome::Ok, value);
        op.task = Some(task.into());
        op.id
    }

    fn get(&mut self, kind: Kind, node: usize, at: (u64, u64), task: &str, status: &str) -> u64 {
        self.task(kind, node, at, task, json!({"result": {"status": status}}))
    }

    fn session(&mut self, kind: Kind, at: (u64, u64), session: &str, uri: Option<&str>) -> u64 {
        let op = self.op(kind, 0, at, Outcome::Ok, json!({}));
        op.session = Some(session.into());
        op.uri = uri.map(str::to_owned);
        op.id
    }

    fn publish(&mut self, at: (u64, u64), uri: &str) -> u64 {
        let op = self.op(Kind::Publish, 1, at, Outcome::Ok, json!({}));
        op.uri = Some(uri.into());
        op.id
    }

    fn event(&mut self, stream: u64, at: u64, what: What) {
        self.0.events.push(Event { stream, at, what });
    }

    fn updated(&mut self, stream: u64, at: u64, uri: &str) {
        self.event(
            stream,
            at,
            What::Message(
                json!({"method": "notifications/resources/updated", "params": {"uri": uri}}),
            ),
        );
    }
}

fn found(f: fn(&History, &Params) -> Vec<checker::Violation>, h: &History) -> usize {
    f(h, &Params::default()).len()
}

#[test]
fn checker_catches_a_cancel_answered_ok_that_never_took_effect() {
    let mut h = H::default();
    h.task(Kind::CreateTask, 0, (0, 10), "t1", json!({}));
    h.get(Kind::GetTask, 1, (100, 110), "t1", "input_required");
    h.task(Kind::CancelTask, 1, (200, 210), "t1", json!({"result": {}}));
    for node in 0..3 {
        h.get(Kind::FinalGet, node, (9000, 9010), "t1", "input_required");
    }
    assert_eq!(found(checker::cancel_took_effect, &h.0), 1);
    // Ended cancelled: nothing to say; already completed before: neither.
    for op in h.0.ops.iter_mut().filter(|o| o.kind == Kind::FinalGet) {
        op.value = json!({"result": {"status": "cancelled"}});
    }
    assert_eq!(found(checker::cancel_took_effect, &h.0), 0);
    // Failed (its node lost) before the cancel was answered, no read saw it:
    // the cancel of a finished task is answered ok and changes nothing.
    h.0.start_ms = 1_796_121_000_000;
    for op in h.0.ops.iter_mut().filter(|o| o.kind == Kind::FinalGet) {
        op.value =
            json!({"result": {"status": "failed", "lastUpdatedAt": "2026-12-01T10:30:00.150Z"}});
    }
    assert_eq!(found(checker::cancel_took_effect, &h.0), 0);
    // Failed after the cancel was answered (at 210 ms): the cancel was lost.
    for op in h.0.ops.iter_mut().filter(|o| o.kind == Kind::FinalGet) {
        op.value =
            json!({"result": {"status": "failed", "lastUpdatedAt": "2026-12-01T10:30:00.500Z"}});
    }
    assert_eq!(found(checker::cancel_took_effect, &h.0), 1);
}

#[test]
fn checker_catches_an_update_answered_ok_whose_answer_never_arrived() {
    let mut h = H::default();
    h.task(Kind::CreateTask, 0, (0, 10), "t1", json!({}));
    h.task(Kind::UpdateTask, 2, (200, 210), "t1", json!({"result": {}}));
    h.get(Kind::FinalGet, 0, (9000, 9010), "t1", "input_required");
    assert_eq!(found(checker::update_took_effect, &h.0), 1);
    h.0.ops.last_mut().expect("op").value = json!({"result": {"status": "completed"}});
    assert_eq!(found(checker::update_took_effect, &h.0), 0);
}

#[test]
fn checker_catches_a_terminal_status_that_changed_and_nodes_that_disagree() {
    let mut h = H::default();
    h.get(Kind::GetTask, 1, (100, 110), "t1", "failed");
    h.get(Kind::GetTask, 0, (200, 210), "t1", "completed");
    h.get(Kind::FinalGet, 0, (9000, 9010), "t1", "completed");
    h.get(Kind::FinalGet, 1, (9000, 9010), "t1", "failed");
    // failed then completed; and the two nodes disagree at the end.
    assert_eq!(found(checker::terminal_is_final, &h.0), 2);
    let mut ok = H::default();
    ok.get(Kind::GetTask, 1, (100, 110), "t1", "working");
    ok.get(Kind::GetTask, 0, (200, 210), "t1", "completed");
    ok.get(Kind::FinalGet, 0, (9000, 9010), "t1", "completed");
    ok.get(Kind::FinalGet, 1, (9000, 9010), "t1", "completed");
    assert_eq!(found(checker::terminal_is_final, &ok.0), 0);
}

#[test]
fn checker_catches_a_subscribe_answered_ok_that_never_delivers() {
    let mut h = H::default();
    let get = h.session(Kind::OpenGet, (0, 10), "s1", None);
    h.session(Kind::Subscribe, (100, 110), "s1", Some("note://1"));
    h.publish((500, 510), "note://1");
    h.session(Kind::Unsubscribe, (9000, 9010), "s1", Some("note://1"));
    h.event(get, 20_000, What::End { by_harness: true });
    assert_eq!(found(checker::subscribed_updates_arrive, &h.0), 1);
    h.updated(get, 600, "note://1");
    assert_eq!(found(checker::subscribed_updates_arrive, &h.0), 0);
    // A listen's acknowledged resource, too.
    let mut l = H::default();
    let listen = l
        .op(
            Kind::Listen,
            1,
            (0, 10),
            Outcome::Ok,
            json!({"id": "L1", "acknowledged": {"resourceSubscriptions": ["note://2"]}}),
        )
        .id;
    l.publish((500, 510), "note://2");
    l.event(listen, 9000, What::End { by_harness: true });
    assert_eq!(found(checker::subscribed_updates_arrive, &l.0), 1);
    // Under a Redis-wide fault (no node), and its recovery, a lost update
    // is allowed.
    l.op(
        Kind::Nemesis,
        0,
        (400, 600),
        Outcome::Ok,
        json!({"nemesis": "cut-connections"}),
    )
    .node = None;
    assert_eq!(found(checker::subscribed_updates_arrive, &l.0), 0);
}

#[test]
fn checker_catches_updates_after_an_unsubscribe_or_a_delete() {
    let mut h = H::default();
    let get = h.session(Kind::OpenGet, (0, 10), "s1", None);
    h.session(Kind::Subscribe, (100, 110), "s1", Some("note://1"));
    h.session(Kind::Unsubscribe, (1000, 1010), "s1", Some("note://1"));
    h.updated(get, 1500, "note://1"); // in flight: allowed
    h.updated(get, 5000, "note://1"); // after the window: not
    h.session(Kind::Delete, (6000, 6010), "s1", None);
    h.event(get, 20_000, What::End { by_harness: true }); // never ended by itself
    let found = checker::nothing_after_unsubscribe(&h.0, &Params::default());
    assert_eq!(found.len(), 2, "{found:?}");
    let mut ok = H::default();
    let get = ok.session(Kind::OpenGet, (0, 10), "s1", None);
    ok.session(Kind::Unsubscribe, (1000, 1010), "s1", Some("note://1"));
    ok.updated(get, 1500, "note://1");
    ok.session(Kind::Delete, (6000, 6010), "s1", None);
    ok.event(get, 6500, What::End { by_harness: false });
    assert_eq!(
        checker::nothing_after_unsubscribe(&ok.0, &Params::default()).len(),
        0
    );
}

#[test]
fn checker_catches_two_get_streams_of_one_session() {
    let mut h = H::default();
    let get = h.session(Kind::OpenGet, (0, 10), "s1", None);
    h.session(Kind::ProbeGet, (5000, 5010), "s1", None);
    h.event(get, 8000, What::Alive);
    assert_eq!(found(checker::one_get_stream, &h.0), 1);
    // Duplicated notifications: two updates for one change.
    let mut d = H::default();
    let get = d.session(Kind::OpenGet, (0, 10), "s1", None);
    d.publish((500, 510), "note://1");
    d.updated(get, 600, "note://1");
    d.updated(get, 601, "note://1");
    assert_eq!(found(checker::one_get_stream, &d.0), 1);
    d.publish((700, 710), "note://1");
    assert_eq!(found(checker::one_get_stream, &d.0), 0);
}

#[test]
fn checker_catches_a_listen_without_exactly_one_final_frame() {
    let mut h = H::default();
    let l = h
        .op(Kind::Listen, 0, (0, 10), Outcome::Ok, json!({"id": "L1"}))
        .id;
    h.event(l, 500, What::End { by_harness: false });
    assert_eq!(
        found(checker::listen_ends_once, &h.0),
        1,
        "ended without a final frame"
    );
    let mut two = H::default();
    let l = two
        .op(Kind::Listen, 0, (0, 10), Outcome::Ok, json!({"id": "L1"}))
        .id;
    two.event(l, 400, What::Message(json!({"id": "L1", "result": {}})));
    two.event(l, 450, What::Message(json!({"id": "L1", "error": {}})));
    two.event(l, 500, What::End { by_harness: false });
    assert_eq!(
        found(checker::listen_ends_once, &two.0),
        2,
        "two final frames, a message after the first"
    );
    let mut ok = H::default();
    let l = ok
        .op(Kind::Listen, 0, (0, 10), Outcome::Ok, json!({"id": "L1"}))
        .id;
    ok.event(l, 400, What::Message(json!({"id": "L1", "result": {}})));
    ok.event(l, 500, What::End { by_harness: false });
    let open = ok
        .op(Kind::Listen, 0, (0, 10), Outcome::Ok, json!({"id": "L2"}))
        .id;
    ok.event(open, 900, What::End { by_harness: true });
    assert_eq!(found(checker::listen_ends_once, &ok.0), 0);
}

#[test]
fn checker_catches_a_listen_that_never_hears_its_task_end() {
    let mut h = H::default();
    let l = h
        .op(
            Kind::Listen,
            1,
            (0, 10),
            Outcome::Ok,
            json!({"id": "L1", "acknowledged": {"taskIds": ["t1"]}}),
        )
        .id;
    h.get(Kind::GetTask, 0, (1000, 1010), "t1", "completed");
    h.event(l, 400, What::Message(json!({"method": "notifications/tasks", "params": {"taskId": "t1", "status": "working"}})));
    h.event(l, 9000, What::End { by_harness: true });
    assert_eq!(found(checker::listen_hears_terminal, &h.0), 1);
    h.event(l, 1100, What::Message(json!({"method": "notifications/tasks", "params": {"taskId": "t1", "status": "completed"}})));
    assert_eq!(found(checker::listen_hears_terminal, &h.0), 0);
}

#[test]
fn checker_catches_a_task_created_past_the_bound() {
    let mut h = H::default();
    let p = Params::default();
    for i in 0..=p.max_tasks {
        let t = format!("t{i}");
        let at = 100 * i as u64;
        h.task(Kind::CreateTask, 0, (at, at + 10), &t, json!({}));
        // Each read unfinished on its node after every create.
        h.get(Kind::GetTask, 0, (5000, 5010), &t, "input_required");
    }
    assert_eq!(found(checker::bounds_hold, &h.0), 1);
    // Another node's copy is no proof: it may lag behind the task's node.
    let mut stale = H::default();
    for i in 0..=p.max_tasks {
        let t = format!("t{i}");
        let at = 100 * i as u64;
        stale.task(Kind::CreateTask, 0, (at, at + 10), &t, json!({}));
        stale.get(Kind::GetTask, 1, (5000, 5010), &t, "working");
    }
    assert_eq!(found(checker::bounds_hold, &stale.0), 0);
    // The same creates spread over two nodes keep each node's bound.
    for op in
        h.0.ops
            .iter_mut()
            .filter(|o| o.kind == Kind::CreateTask && o.id % 4 == 1)
    {
        op.node = Some(2);
    }
    assert_eq!(found(checker::bounds_hold, &h.0), 0);
}

#[test]
fn checker_catches_a_holder_mark_kept_after_its_stream_ended() {
    let mut h = H::default();
    let get = h.session(Kind::OpenGet, (0, 10), "s1", None);
    h.op(
        Kind::Nemesis,
        0,
        (1000, 18_000),
        Outcome::Ok,
        json!({"nemesis": "outage-redis"}),
    )
    .node = None;
    h.event(get, 1000, What::End { by_harness: false });
    let refused = h.op(
        Kind::OpenGet,
        1,
        (19_000, 19_010),
        Outcome::Failed,
        json!({"status": 409}),
    );
    refused.session = Some("s1".into());
    // Right after Redis is back (the reconnect): allowed.
    assert_eq!(found(checker::get_released, &h.0), 0);
    let late = h.op(
        Kind::OpenGet,
        2,
        (30_000, 30_010),
        Outcome::Failed,
        json!({"status": 409}),
    );
    late.session = Some("s1".into());
    assert_eq!(found(checker::get_released, &h.0), 1);
}

#[test]
fn checker_gives_the_holder_its_reconnect_after_each_fault_that_follows() {
    let mut h = H::default();
    let get = h.session(Kind::OpenGet, (0, 10), "s1", None);
    h.op(
        Kind::Nemesis,
        0,
        (1000, 18_000),
        Outcome::Ok,
        json!({"nemesis": "outage-redis"}),
    )
    .node = None;
    h.event(get, 1000, What::End { by_harness: false });
    // Redis restarted again while the nodes were reconnecting.
    h.op(
        Kind::Nemesis,
        1,
        (22_000, 23_000),
        Outcome::Ok,
        json!({"nemesis": "restart-redis"}),
    )
    .node = None;
    let refused = h.op(
        Kind::OpenGet,
        2,
        (27_500, 27_510),
        Outcome::Failed,
        json!({"status": 409}),
    );
    refused.session = Some("s1".into());
    assert_eq!(found(checker::get_released, &h.0), 0);
    // Long after the second fault too: a stale mark.
    let late = h.op(
        Kind::OpenGet,
        3,
        (40_000, 40_010),
        Outcome::Failed,
        json!({"status": 409}),
    );
    late.session = Some("s1".into());
    assert_eq!(found(checker::get_released, &h.0), 1);
}
