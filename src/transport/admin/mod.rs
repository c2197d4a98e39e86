//! The admin listener: Prometheus metrics and health probes on an address of
//! their own, never the MCP port (off unless configured).
//!
//! | route | answers |
//! |---|---|
//! | `GET /metrics` | every genmcp metric as Prometheus text (0.0.4); see `docs/operations.md` |
//! | `GET /healthz` | 200 `ok` while the process runs |
//! | `GET /readyz` | 200 `ready` while listens are accepted; 503 `draining` during a graceful shutdown, 503 `down: NAME, ...` while a named [`ReadinessCheck`] fails |
//!
//! With [`crate::http::serve`] or [`crate::http::start`], set
//! [`crate::http::HttpConfig::admin`]; the listener stops after the drain, so
//! `/readyz` answers 503 for the whole drain window. With a mounted
//! [`crate::http::Endpoint`], build an [`Admin`] from `endpoint.server()` and
//! mount [`Admin::service`] in an `App` of its own, or run it with [`start`].
//!
//! ```no_run
//! # async fn run(bus_up: std::sync::Arc<std::sync::atomic::AtomicBool>) -> std::io::Result<()> {
//! use std::sync::atomic::Ordering;
//! use genmcp::admin::AdminConfig;
//! use genmcp::prelude::*;
//!
//! let mut config = HttpConfig::default();
//! config.admin = Some(
//!     AdminConfig::new("127.0.0.1:9090".parse().unwrap())
//!         .check("bus", move || bus_up.load(Ordering::Relaxed)),
//! );
//! let suite = Suite::builder(Implementation::new("app", "1.0.0")).build();
//! genmcp::http::serve(suite, config).await
//! # }
//! ```

mod health;
mod metrics;

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use actix_web::dev::{AppService, HttpServiceFactory, ServerHandle};
use actix_web::{App, HttpResponse, HttpServer, web};
use prometheus_client::registry::Registry;

pub use health::{Readiness, ReadinessCheck};
pub use metrics::CONTENT_TYPE;

use crate::runtime::Server;

/// Where the admin listener binds and what `/readyz` asks. There is no
/// default address: the listener runs only when an `AdminConfig` is given.
///
/// ```
/// let config = genmcp::admin::AdminConfig::new("127.0.0.1:9090".parse().unwrap())
///     .check("bus", || true);
/// assert_eq!(config.checks.len(), 1);
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub struct AdminConfig {
    /// The address to bind. Never the MCP port: [`crate::http::start`]
    /// refuses a configuration where both name the same port.
    pub addr: SocketAddr,
    /// Named readiness checks (default none): `/readyz` answers 503 naming
    /// every one that returns `false`.
    pub checks: Vec<(String, ReadinessCheck)>,
}

impl AdminConfig {
    /// The admin listener on `addr`, with no readiness check but the drain.
    pub fn new(addr: SocketAddr) -> Self {
        AdminConfig {
            addr,
            checks: Vec::new(),
        }
    }

    /// Adds a named readiness check (e.g. the Redis bus's health flag).
    pub fn check(
        mut self,
        name: impl Into<String>,
        check: impl Fn() -> bool + Send + Sync + 'static,
    ) -> Self {
        self.checks.push((name.into(), Arc::new(check)));
        self
    }
}

impl std::fmt::Debug for AdminConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminConfig")
            .field("addr", &self.addr)
            .field(
                "checks",
                &self.checks.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// The admin service of one runtime root: its metrics registry and its
/// readiness checks. Cheap to clone.
#[derive(Clone)]
pub struct Admin {
    server: Server,
    checks: Arc<[(String, ReadinessCheck)]>,
    registry: Arc<Registry>,
}

impl std::fmt::Debug for Admin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admin")
            .field("server", &self.server)
            .field(
                "checks",
                &self.checks.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl Admin {
    /// The admin service of `server` (e.g. `endpoint.server().clone()`), with
    /// `checks` for `/readyz`.
    pub fn new(server: Server, checks: Vec<(String, ReadinessCheck)>) -> Self {
        let checks: Arc<[(String, ReadinessCheck)]> = checks.into();
        Admin {
            registry: Arc::new(metrics::registry(&server, &checks, None)),
            server,
            checks,
        }
    }

    /// Also exports the suite's spent-record refusals
    /// (`genmcp_spent_refusals_total`, from [`crate::suite::Suite::spent_refusals`]).
    pub fn with_spent_refusals(mut self, refusals: Arc<crate::suite::SpentRefusals>) -> Self {
        self.registry = Arc::new(metrics::registry(
            &self.server,
            &self.checks,
            Some(refusals),
        ));
        self
    }

    /// Every metric, as `GET /metrics` answers it (Prometheus text 0.0.4).
    pub fn metrics_text(&self) -> String {
        metrics::encode(&self.registry)
    }

    /// What `GET /readyz` answers now.
    pub fn readiness(&self) -> Readiness {
        health::readiness(&self.server, &self.checks)
    }

    /// `GET /metrics`, `/healthz` and `/readyz` as an actix-web service, for
    /// an `App` of the application's own (`App::new().service(admin.service())`).
    /// Keep it off the MCP listener: anyone who can reach it reads the metrics.
    pub fn service(&self) -> AdminService {
        AdminService {
            admin: web::Data::new(self.clone()),
        }
    }
}

/// The admin routes as an [`HttpServiceFactory`]; made by [`Admin::service`].
pub struct AdminService {
    admin: web::Data<Admin>,
}

impl HttpServiceFactory for AdminService {
    fn register(self, config: &mut AppService) {
        web::resource("/metrics")
            .app_data(self.admin.clone())
            .route(web::get().to(get_metrics))
            .register(config);
        web::resource("/healthz")
            .route(web::get().to(get_healthz))
            .register(config);
        web::resource("/readyz")
            .app_data(self.admin)
            .route(web::get().to(get_readyz))
            .register(config);
    }
}

async fn get_metrics(admin: web::Data<Admin>) -> HttpResponse {
    HttpResponse::Ok()
        .content_type(CONTENT_TYPE)
        .body(admin.metrics_text())
}

async fn get_healthz() -> HttpResponse {
    HttpResponse::Ok().content_type("text/plain").body("ok\n")
}

async fn get_readyz(admin: web::Data<Admin>) -> HttpResponse {
    let readiness = admin.readiness();
    let mut resp = if readiness.is_ready() {
        HttpResponse::Ok()
    } else {
        HttpResponse::ServiceUnavailable()
    };
    resp.content_type("text/plain")
        .body(format!("{}\n", readiness.describe()))
}

/// A running admin listener (see [`start`]).
#[derive(Debug)]
pub struct AdminRunning {
    /// The bound address.
    pub addr: SocketAddr,
    handle: ServerHandle,
}

impl AdminRunning {
    /// Stops the listener (in-flight scrapes finish first).
    pub async fn stop(&self) {
        self.handle.stop(true).await;
    }
}

/// Binds `addr` and serves `admin` on the current actix System (one worker),
/// returning at once. The listener runs until [`AdminRunning::stop`].
pub fn start(admin: Admin, addr: SocketAddr) -> io::Result<AdminRunning> {
    let http = HttpServer::new(move || App::new().service(admin.service()))
        .workers(1)
        .disable_signals()
        .shutdown_timeout(1)
        .bind(addr)?;
    let addr = http
        .addrs()
        .first()
        .copied()
        .ok_or_else(|| io::Error::other("no admin address bound"))?;
    let running = http.run();
    let handle = running.handle();
    actix_rt::spawn(running);
    Ok(AdminRunning { addr, handle })
}
