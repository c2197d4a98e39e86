//! An application's own `HttpServer` (built by the test, with genmcp mounted in
//! it) run on a thread with its own actix System, stopped the way an
//! application stops it: drain the endpoint, then stop the server.

use std::io;
use std::net::SocketAddr;
use std::sync::mpsc;
use std::thread::JoinHandle;

use genmcp::http::DrainHandle;

/// What a test's build function returns: the running server, its address, the
/// endpoint's drain handle.
pub type Built = (actix_web::dev::Server, SocketAddr, DrainHandle);

pub struct UserServer {
    pub addr: SocketAddr,
    stop: Option<mpsc::Sender<()>>,
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
        let (stop_tx, stop_rx) = mpsc::channel::<()>();
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
                let (tx, rx) = tokio::sync::oneshot::channel::<()>();
                std::thread::spawn(move || {
                    let _ = stop_rx.recv();
                    let _ = tx.send(());
                });
                let _ = rx.await;
                // How an application stops: drain the MCP endpoint, then its server.
                let drained = drain.drain_and_stop(&handle).await;
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
        self.stop_inner()
    }

    fn stop_inner(&mut self) -> bool {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
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
        self.stop_inner();
    }
}
