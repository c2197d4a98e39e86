//! `start`, `serve` and `ServerThread`: conveniences that bind an `HttpServer`
//! of their own around one [`Endpoint`], the same service and drain an
//! application mounts itself.

use std::io;
use std::net::SocketAddr;

use actix_web::dev::ServerHandle;
use actix_web::{App, HttpServer};
use tokio::sync::oneshot;

use super::config::HttpConfig;
use super::mount::{DrainHandle, Endpoint};
use crate::admin::{self, Admin, AdminRunning};
use crate::runtime::Server;
use crate::subscription::SubscriptionHandler;
use crate::suite::Suite;

/// A started HTTP server.
pub struct Running {
    /// The bound address.
    pub addr: SocketAddr,
    /// The runtime root: metrics, shutdown.
    pub server: Server,
    /// The admin listener's address, when [`HttpConfig::admin`] is set.
    pub admin_addr: Option<SocketAddr>,
    handle: ServerHandle,
    drain: DrainHandle,
    admin: Option<AdminRunning>,
}

impl Running {
    /// Graceful stop: every open stream gets its completion result (and its
    /// `handle_close`), then the HTTP server stops, then the admin listener
    /// (so `/readyz` answers 503 `draining` for the whole drain).
    pub async fn stop(&self) {
        self.drain.drain_and_stop(&self.handle).await;
        if let Some(admin) = &self.admin {
            admin.stop().await;
        }
    }

    /// The actix-web handle (to await or stop the server directly).
    pub fn handle(&self) -> ServerHandle {
        self.handle.clone()
    }
}

/// Binds and starts the server on the current actix System, returning at once.
/// The server runs until [`Running::stop`]. It is an `HttpServer` whose `App`
/// holds nothing but [`Endpoint::service`]. With [`HttpConfig::admin`] the
/// admin listener starts too (on the current System, one worker); an admin
/// address on the MCP port is refused (`InvalidInput`).
pub fn start<H: SubscriptionHandler>(
    suite: Suite<H>,
    config: HttpConfig,
) -> io::Result<(Running, actix_web::dev::Server)> {
    if let Some(a) = &config.admin
        && a.addr.port() != 0
        && a.addr.port() == config.port
    {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("the admin listener ({}) must not use the MCP port", a.addr),
        ));
    }
    let spent_refusals = suite.spent_refusals();
    let endpoint = Endpoint::new(suite, config.clone());
    let drain = endpoint.drain_handle();
    let http = HttpServer::new(move || App::new().service(endpoint.service()))
        .workers(config.workers.max(1))
        .disable_signals()
        .shutdown_timeout(1)
        .bind((config.host.as_str(), config.port))?;
    let addr = http
        .addrs()
        .first()
        .copied()
        .ok_or_else(|| io::Error::other("no address bound"))?;
    if let Some(auth) = &config.auth
        && auth.resource.is_none()
        && addr.ip().is_unspecified()
    {
        // The default resource URL is the listening address: on a wildcard
        // address that names no host a client can reach.
        tracing::warn!(
            %addr,
            "authentication without a resource URL on a wildcard address: \
             the protected resource metadata names http://{addr}{}; set \
             AuthConfig::resource (--resource-url)",
            config.path
        );
    }
    let admin = match &config.admin {
        Some(a) if a.addr == addr => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("the admin listener ({addr}) must not be the MCP listener"),
            ));
        }
        Some(a) => Some(admin::start(
            Admin::new(drain.server().clone(), a.checks.clone())
                .with_spent_refusals(spent_refusals),
            a.addr,
        )?),
        None => None,
    };
    let running = http.run();
    Ok((
        Running {
            addr,
            server: drain.server().clone(),
            admin_addr: admin.as_ref().map(|a| a.addr),
            handle: running.handle(),
            drain,
            admin,
        },
        running,
    ))
}

/// Serves `suite` until SIGINT or SIGTERM, then drains gracefully: running
/// tasks get the drain timeout to finish (those still running end `failed`,
/// "server shutting down"), then every open stream gets its completion result
/// before the process exits.
pub async fn serve<H: SubscriptionHandler>(suite: Suite<H>, config: HttpConfig) -> io::Result<()> {
    let (running, http) = start(suite, config)?;
    tracing::info!(addr = %running.addr, "genmcp listening");
    if let Some(admin) = running.admin_addr {
        tracing::info!(addr = %admin, "admin listening (/metrics, /healthz, /readyz)");
    }
    let http = actix_rt::spawn(http);
    shutdown_signal().await;
    // Tasks first (their watchers hear how they ended), then the streams.
    running.stop().await;
    let _ = http.await;
    Ok(())
}

/// Resolves on SIGINT or SIGTERM (Ctrl-C elsewhere): what [`serve`] waits
/// for before it drains. For a mounted endpoint, run the server with
/// `.disable_signals()` and await this, then [`DrainHandle::drain_and_stop`].
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// A server running on its own thread with its own actix System: for tests,
/// benchmarks and embedding in non-actix programs.
pub struct ServerThread {
    /// The bound address.
    pub addr: SocketAddr,
    /// The runtime root: metrics, shutdown.
    pub server: Server,
    /// The admin listener's address, when [`HttpConfig::admin`] is set.
    pub admin_addr: Option<SocketAddr>,
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ServerThread {
    /// Starts `make_suite()` on a new thread (the suite is built there).
    pub fn spawn<H, F>(make_suite: F, config: HttpConfig) -> io::Result<ServerThread>
    where
        H: SubscriptionHandler,
        F: FnOnce() -> Suite<H> + Send + 'static,
    {
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            let system = actix_rt::System::new();
            system.block_on(async move {
                let (running, http) = match start(make_suite(), config) {
                    Ok(r) => r,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let _ = ready_tx.send(Ok((
                    running.addr,
                    running.server.clone(),
                    running.admin_addr,
                )));
                let http = actix_rt::spawn(http);
                let (tx, rx) = oneshot::channel::<()>();
                std::thread::spawn(move || {
                    let _ = stop_rx.recv();
                    let _ = tx.send(());
                });
                let _ = rx.await;
                running.stop().await;
                let _ = http.await;
            });
        });
        let (addr, server, admin_addr) = ready_rx
            .recv()
            .map_err(|_| io::Error::other("server thread died"))??;
        Ok(ServerThread {
            addr,
            server,
            admin_addr,
            stop: Some(stop_tx),
            thread: Some(thread),
        })
    }

    /// The endpoint URL.
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// Graceful stop, waiting for the thread to end.
    pub fn stop(mut self) {
        self.stop_inner();
    }

    fn stop_inner(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for ServerThread {
    fn drop(&mut self) {
        self.stop_inner();
    }
}
