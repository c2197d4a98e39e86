//! A 2025 session's GET stream offered by a draining node, under faults:
//! the holder paused (`SIGSTOP`) or killed (`SIGKILL`) after it offered the
//! stream, while the client resumes on another node and updates are
//! published. The other node never takes over a stream its holder did not
//! hand over, and the client gets every update once and in order, or a
//! 410 after a prefix of them: never a gap, never an update twice. Real
//! `genmcp serve --bus` processes on one `redis-server`.

#[path = "../../tests/common/mod.rs"]
mod common;

use std::time::Duration;

use common::fleet_notes::{add_note, get, read_until_quiet, resume_until, session_on};
use common::legacy;
use common::redis_server::RedisServer;
use common::serve_child::ServeNode;
use common::{Exchange, wait_until};
use serde_json::json;

/// How long a resumed stream is read without an update before it is cut.
const QUIET: Duration = Duration::from_secs(3);

const KEY_HEX: &str = "5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a";

fn node(redis: &RedisServer) -> ServeNode {
    ServeNode::start(
        &["--bus", &redis.url(), "--keep-alive", "1"],
        &[("GENMCP_KEY", KEY_HEX)],
    )
}

/// Field `field` of the session's hash in Redis (`""`: none).
fn session_field(redis: &RedisServer, session: &str, field: &str) -> String {
    let sid = legacy::sid_of(session);
    let keys = redis
        .command(&["KEYS", &format!("*sess:{{sessions}}:{sid}")])
        .expect("KEYS answers");
    let Some(hash) = keys.lines().find(|l| l.contains(&sid)) else {
        return String::new();
    };
    let reply = redis.command(&["HGET", hash, field]).expect("HGET answers");
    reply.lines().nth(1).unwrap_or("").to_owned()
}

/// Resumes on `b` after `last` until the stream is gone or every update of
/// `made` came (bounded): whether it said gone.
fn resume_to_the_end(
    b: &ServeNode,
    session: &str,
    (got, last): (&mut Vec<String>, Option<String>),
    made: &[String],
) -> bool {
    let mut last = last;
    resume_until(b.addr, session, (got, &mut last), (made.len(), QUIET, 20))
}

/// Drains node `a` (`SIGTERM`): its response ends; waits until it offers
/// the stream. The updates its stream carried until then, its last id.
fn drain_until_offered(
    redis: &RedisServer,
    a: &ServeNode,
    session: &str,
    stream: Exchange,
) -> (Vec<String>, Option<String>) {
    a.signal("-TERM");
    let (got, last) = read_until_quiet(stream, QUIET);
    assert!(
        wait_until(Duration::from_secs(5), || !session_field(
            redis, session, "ho"
        )
        .is_empty()),
        "the draining holder never offered its stream"
    );
    (got, last)
}

#[test]
fn a_holder_paused_after_it_offered_its_stream_is_not_taken_over_and_nothing_is_lost() {
    let redis = RedisServer::start();
    let a = node(&redis);
    let b = node(&redis);
    let (session, uris, stream) = session_on(a.addr, b.addr, 4);
    let holder = session_field(&redis, &session, "h");
    let (mut got, last) = drain_until_offered(&redis, &a, &session, stream);
    got.insert(0, uris[0].clone());
    a.signal("-STOP");
    let mut made = vec![uris[0].clone()];
    for uri in &uris[1..] {
        add_note(
            b.addr,
            &session,
            json!({"uri": uri, "text": "while paused"}),
        );
        made.push(uri.clone());
    }
    // The client resumes on B: the paused holder cannot cut, so B gives up
    // (after its wait) and reads what the holder records.
    let id = last.clone().expect("events carry ids");
    let resumed = get(b.addr, &session, Some(&id));
    assert_eq!(resumed.status, 200);
    assert_eq!(
        session_field(&redis, &session, "h"),
        holder,
        "a node took over a stream its paused holder never handed over"
    );
    assert_eq!(
        session_field(&redis, &session, "hc"),
        "",
        "the taker withdrew"
    );
    a.signal("-CONT");
    let (more, next) = read_until_quiet(resumed, QUIET);
    got.extend(more);
    // Awake, the holder's late cut finds the preparation withdrawn.
    let h = session_field(&redis, &session, "h");
    assert!(
        h.is_empty() || h == holder,
        "moved after the taker gave up: {h}"
    );
    let gone = resume_to_the_end(&b, &session, (&mut got, next.or(last)), &made);
    assert!(
        made.starts_with(&got),
        "a gap or a repeat: {got:?} of {made:?}"
    );
    assert!(gone || got == made);
}

#[test]
fn a_holder_killed_after_it_offered_its_stream_ends_in_gone_never_a_gap() {
    let redis = RedisServer::start();
    let mut a = node(&redis);
    let b = node(&redis);
    let (session, uris, stream) = session_on(a.addr, b.addr, 4);
    let holder = session_field(&redis, &session, "h");
    let (mut got, last) = drain_until_offered(&redis, &a, &session, stream);
    got.insert(0, uris[0].clone());
    let _ = a.child.kill();
    let _ = a.child.wait();
    let mut made = vec![uris[0].clone()];
    for uri in &uris[1..] {
        add_note(
            b.addr,
            &session,
            json!({"uri": uri, "text": "after the kill"}),
        );
        made.push(uri.clone());
    }
    let gone = resume_to_the_end(&b, &session, (&mut got, last), &made);
    assert!(
        gone,
        "updates nobody recorded were not reported gone: {got:?}"
    );
    assert!(
        made.starts_with(&got),
        "a gap or a repeat: {got:?} of {made:?}"
    );
    let h = session_field(&redis, &session, "h");
    assert_ne!(h, holder, "the dead holder's mark outlived it");
}
