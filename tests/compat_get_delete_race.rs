//! A DELETE that lands while the session's GET stream is being opened (after
//! the GET reserved the session's stream, before it recorded it) still ends
//! that stream: over real HTTP, with a handler whose `subscribe` is slow to
//! hold the window open.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::{legacy, wait_until};
use genmcp::prelude::*;

#[derive(Default)]
struct Counts {
    opened: AtomicUsize,
    closed: AtomicUsize,
}

/// Takes 300 ms to subscribe, blocking its worker: the GET that opens it
/// records its stream only afterwards.
struct SlowSubscribe(Arc<Counts>);

impl SubscriptionHandler for SlowSubscribe {
    type Message = ();
    type State = ();

    fn subscribe(
        &self,
        _filter: &SubscriptionFilter,
        _cx: &mut SubscribeCx<'_, ()>,
    ) -> Subscribe<()> {
        self.0.opened.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(300));
        Subscribe::Accept(())
    }

    fn handle_message(&self, _msg: (), _channel: &Channel, _state: &mut ()) -> Flow {
        Flow::Continue
    }

    fn handle_close(&self, _channel: &Channel, _state: ()) {
        self.0.closed.fetch_add(1, Ordering::SeqCst);
    }

    fn subscription_capabilities(&self, _channel: &Channel) -> SubscriptionCapabilities {
        SubscriptionCapabilities::none().with_tools_list_changed(true)
    }
}

#[test]
fn compat_a_get_stream_never_outlives_a_delete_that_raced_its_opening() {
    let counts = Arc::new(Counts::default());
    let mut config = common::config();
    // Two workers: the DELETE is served while the GET's worker is busy.
    config.workers = 2;
    let c = counts.clone();
    let srv = ServerThread::spawn(
        move || {
            Suite::builder(Implementation::new("slow", "1"))
                .subscriptions(SlowSubscribe(c.clone()))
                .build()
        },
        config,
    )
    .expect("server starts");
    for attempt in 0..5 {
        let session = legacy::initialize(srv.addr);
        let before = counts.opened.load(Ordering::SeqCst);
        let (addr, s) = (srv.addr, session.clone());
        let get = std::thread::spawn(move || legacy::get(addr, Some(&s)));
        assert!(wait_until(Duration::from_secs(5), || {
            counts.opened.load(Ordering::SeqCst) > before
        }));
        assert_eq!(
            legacy::delete(srv.addr, &session).status,
            200,
            "attempt {attempt}"
        );
        let mut stream = get.join().expect("GET thread");
        if stream.status == 200 {
            // Past the opening comment, the body must end.
            stream.set_timeout(Duration::from_secs(3));
            let mut end = stream.try_next_event();
            for _ in 0..4 {
                if !matches!(end, Ok(Some(common::Event::Comment(_)))) {
                    break;
                }
                end = stream.try_next_event();
            }
            assert!(
                matches!(end, Ok(None)),
                "attempt {attempt}: the GET stream outlived its DELETE: {end:?} opened {} closed {}",
                counts.opened.load(Ordering::SeqCst),
                counts.closed.load(Ordering::SeqCst)
            );
        } else {
            assert_eq!(stream.status, 404, "attempt {attempt}");
        }
        let opened = counts.opened.load(Ordering::SeqCst);
        assert!(
            wait_until(Duration::from_secs(5), || {
                counts.closed.load(Ordering::SeqCst) == opened
            }),
            "attempt {attempt}: handle_close ran for every stream"
        );
    }
}
