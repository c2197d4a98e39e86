//! An application's own `HttpServer` (built by the test, with genmcp mounted in
//! it) run on a thread with its own actix System, stopped the way an
//! application stops it: drain the endpoint, then stop the server.

use std::io;
use std::net::SocketAddr;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use genmcp::http::DrainHandle;

/// What a test's build function returns: the running server, its address, the
/// endpoint's drain handle.
pub type Built = (actix_web::dev::Server, SocketAddr, DrainHandle);

pub struct UserServer {
    pub addr: SocketAddr,
    stop: Option<mpsc::Sender<Option<Duration>>>,
    done: Option<mpsc::Receiver<bool>>,
    thread: Option<JoinHandle<()>>,
}

impl UserServer {
    /// Runs `build` inside a new actix System on its own thread.
    pub fn spawn<F>(build: F) -> UserServer
    where
        F: FnOnce() -> io::Result<Built> + Send + 'static,
    {
        let (ready_tx, ready_rx) = mpsc::channel();
        let (stop_tx, stop_rx) = mpsc::channel::<Option<Duration>>();
        let (done_tx, done_rx) = mpsc::channel::<bool>();
        let thread = std::thread::spawn(move || {
            let system = actix_rt::System::new();
            system.block_on(async move {
                let (http, addr, drain) = match build() {
                    Ok(b) => b,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let _ = ready_tx.send(Ok(addr));
                let handle = http.handle();
                let http = actix_rt::spawn(http);
                let (tx, rx) = tokio::sync::oneshot::channel::<Option<Duration>>();
                std::thread::spawn(move || {
                    let _ = tx.send(stop_rx.recv().ok().flatten());
                });
                // How an application stops: drain the MCP endpoint (for the
                // configured time, or the one given), then its server.
                let drained = match rx.await.ok().flatten() {
                    Some(timeout) => {
                        let drained = drain.drain(timeout).await;
                        handle.stop(true).await;
                        drained
                    }
                    None => drain.drain_and_stop(&handle).await,
                };
                let _ = http.await;
                let _ = done_tx.send(drained);
            });
        });
        let addr = ready_rx
            .recv()
            .expect("server thread died")
            .expect("server starts");
        UserServer {
            addr,
            stop: Some(stop_tx),
            done: Some(done_rx),
            thread: Some(thread),
        }
    }

    /// Drains and stops; returns whether the drain finished in time.
    pub fn stop(mut self) -> bool {
        self.stop_inner(None)
    }

    /// Drains for `timeout` (`DrainHandle::drain`) and stops; returns
    /// whether the drain finished in time.
    pub fn stop_within(mut self, timeout: Duration) -> bool {
        self.stop_inner(Some(timeout))
    }

    fn stop_inner(&mut self, timeout: Option<Duration>) -> bool {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(timeout);
        }
        let drained = self
            .done
            .take()
            .and_then(|d| d.recv().ok())
            .unwrap_or(false);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        drained
    }
}

impl Drop for UserServer {
    fn drop(&mut self) {
        self.stop_inner(None);
    }
}
