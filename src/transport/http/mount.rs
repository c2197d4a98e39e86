//! Mounting: the MCP endpoint as an ordinary actix-web service, for the
//! application's own `App`, `HttpServer`, scopes and middleware.
//!
//! [`Endpoint`] is built once, outside the `HttpServer::new` factory (which runs
//! once per worker), and shared by every worker: one runtime root ([`Server`]:
//! limits, metrics, shutdown), one in-flight limit. Its service registers one
//! resource (POST → the handler, any other method → 405) carrying the endpoint's
//! state as resource-level app data, so nothing has to be added to the `App` and
//! two endpoints can live in one `App`.

use std::time::Duration;

use actix_web::dev::{AppService, HttpServiceFactory, ServerHandle};
use actix_web::web;

use super::config::HttpConfig;
use super::post::post;
use super::reply::method_not_allowed;
use super::state::AppState;
use crate::runtime::{Metrics, Server};
use crate::subscription::SubscriptionHandler;
use crate::suite::Suite;
use crate::suite::tasks::Tasks;

/// The MCP endpoint of one [`Suite`], ready to be mounted in any actix-web `App`.
///
/// Cheap to clone (one shared state). Build it **before** `HttpServer::new` and
/// move clones into the factory: every worker must serve the same endpoint, or
/// limits, metrics and the drain would be per worker.
///
/// Everything [`super::start`] does holds when mounted: Host/Origin validation,
/// the in-flight limit, body size and body deadline, the assigns hook (run on
/// the head, after your middleware, before the body is read), keep-alive
/// comments, metrics, and the graceful drain ([`Endpoint::drain_handle`]).
///
/// ```no_run
/// use actix_web::{App, HttpServer, middleware::Logger, web};
/// use genmcp::prelude::*;
///
/// #[actix_web::main]
/// async fn main() -> std::io::Result<()> {
///     let suite = Suite::builder(Implementation::new("app", "1.0.0")).build();
///     let mcp = genmcp::http::Endpoint::new(suite, HttpConfig::default());
///     let drain = mcp.drain_handle();
///     let server = HttpServer::new(move || {
///         App::new()
///             .wrap(Logger::default())
///             .route("/health", web::get().to(|| async { "ok" }))
///             .configure(genmcp::http::mount(&mcp)) // POST /mcp
///     })
///     .disable_signals() // the drain below handles SIGINT/SIGTERM
///     .bind(("127.0.0.1", 8080))?
///     .run();
///     let handle = server.handle();
///     actix_web::rt::spawn(async move {
///         genmcp::http::shutdown_signal().await;
///         // Every open stream gets its completion result, then the server stops.
///         drain.drain_and_stop(&handle).await;
///     });
///     server.await
/// }
/// ```
pub struct Endpoint<H: SubscriptionHandler> {
    state: web::Data<AppState<H>>,
}

impl<H: SubscriptionHandler> Clone for Endpoint<H> {
    fn clone(&self) -> Self {
        Endpoint {
            state: self.state.clone(),
        }
    }
}

impl<H: SubscriptionHandler> std::fmt::Debug for Endpoint<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("path", &self.state.config.path)
            .field("server", &self.state.server)
            .finish()
    }
}

impl<H: SubscriptionHandler> Endpoint<H> {
    /// The endpoint of `suite` with `config` (its `host`, `port` and `workers`
    /// are not used here: your `HttpServer` binds and runs).
    pub fn new(suite: Suite<H>, config: HttpConfig) -> Self {
        Endpoint {
            state: web::Data::new(AppState::new(suite, config)),
        }
    }

    /// The service at `config.path` (default `/mcp`), for `App::service` or
    /// `web::scope(..).service`: `web::scope("/api").service(mcp.service())`
    /// answers on `/api/mcp`.
    pub fn service(&self) -> EndpointService<H> {
        self.service_at(self.state.config.path.clone())
    }

    /// The service at `path` instead of `config.path` (relative to the
    /// enclosing scope).
    pub fn service_at(&self, path: impl Into<String>) -> EndpointService<H> {
        EndpointService {
            state: self.state.clone(),
            path: path.into(),
        }
    }

    /// The runtime root: metrics, shutdown, limits.
    pub fn server(&self) -> &Server {
        &self.state.server
    }

    /// A snapshot of the counters (open streams, frames, closes by reason).
    pub fn metrics(&self) -> Metrics {
        self.state.server.metrics()
    }

    /// The configuration.
    pub fn config(&self) -> &HttpConfig {
        &self.state.config
    }

    /// A handle that drains this endpoint when the application stops; it is
    /// `Send + Sync + Clone` and not generic, so it can live anywhere.
    pub fn drain_handle(&self) -> DrainHandle {
        DrainHandle {
            server: self.state.server.clone(),
            tasks: self.state.suite.task_supervisor(),
            timeout: self.state.config.drain_timeout,
        }
    }
}

/// `App::configure(genmcp::http::mount(&endpoint))`: registers the endpoint at
/// its `config.path`. Same as `App::service(endpoint.service())`.
///
/// ```
/// use actix_web::{App, web};
/// use genmcp::prelude::*;
///
/// let suite = Suite::builder(Implementation::new("app", "1.0.0")).build();
/// let mcp = genmcp::http::Endpoint::new(suite, HttpConfig::default());
/// // In the `HttpServer::new` factory:
/// let _app = App::new()
///     .configure(genmcp::http::mount(&mcp))                          // POST /mcp
///     .service(web::scope("/v2").configure(genmcp::http::mount(&mcp))); // POST /v2/mcp
/// ```
pub fn mount<H: SubscriptionHandler>(
    endpoint: &Endpoint<H>,
) -> impl FnOnce(&mut web::ServiceConfig) + 'static {
    let service = endpoint.service();
    move |config: &mut web::ServiceConfig| {
        config.service(service);
    }
}

/// The endpoint as an actix-web [`HttpServiceFactory`]: one resource, `POST`
/// to the MCP handler, any other method 405 with `Allow: POST`. Made by
/// [`Endpoint::service`].
pub struct EndpointService<H: SubscriptionHandler> {
    state: web::Data<AppState<H>>,
    path: String,
}

impl<H: SubscriptionHandler> HttpServiceFactory for EndpointService<H> {
    fn register(self, config: &mut AppService) {
        let mounted = super::auth::MountPath(self.path.clone());
        if self.state.config.auth.is_some() {
            // Protected Resource Metadata, path form and root form (RFC 9728
            // §3.1), relative to where the endpoint is mounted.
            let metadata = super::auth::metadata::<H>;
            let well_known = super::auth::WELL_KNOWN;
            web::resource(format!("{well_known}{}", self.path))
                .app_data(self.state.clone())
                .app_data(mounted.clone())
                .route(web::get().to(metadata))
                .register(config);
            web::resource(well_known)
                .app_data(self.state.clone())
                .app_data(mounted.clone())
                .route(web::get().to(metadata))
                .register(config);
        }
        web::resource(self.path)
            .app_data(self.state)
            .app_data(mounted)
            .route(web::post().to(post::<H>))
            .route(web::get().to(super::compat::get::<H>))
            .route(web::delete().to(super::compat::delete::<H>))
            .default_service(web::to(method_not_allowed))
            .register(config);
    }
}

/// Drains an [`Endpoint`] when the application stops its server: every open
/// listen stream gets its completion result (and its handler's `handle_close`),
/// and new listens are refused from then on. Await it **before**
/// `ServerHandle::stop`: a stopping `HttpServer` no longer writes to its
/// streams.
///
/// ```no_run
/// # async fn stop(drain: genmcp::http::DrainHandle, handle: actix_web::dev::ServerHandle) {
/// use std::time::Duration;
/// drain.drain(Duration::from_secs(5)).await;  // completion results are out
/// handle.stop(true).await;                    // then stop the HTTP server
/// // or, with `drain_timeout` from the config: drain.drain_and_stop(&handle).await;
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct DrainHandle {
    server: Server,
    tasks: Tasks,
    timeout: Duration,
}

impl DrainHandle {
    /// Starts the drain: running tasks get `timeout` to finish (no new task
    /// starts; those still running then end `failed`, "server shutting down",
    /// and the streams watching them hear it), then every stream gets its
    /// completion result, waited for at most `timeout` again. Returns whether
    /// the streams drained in time. Unary requests are not cut: a graceful
    /// `ServerHandle::stop(true)` lets them finish.
    pub async fn drain(&self, timeout: Duration) -> bool {
        if self.tasks.running() > 0 {
            tracing::info!("shutting down: finishing running tasks");
        }
        self.tasks.drain(timeout).await;
        self.server.shutdown_within(timeout);
        let drained = self.server.drained(timeout).await;
        if !drained {
            tracing::warn!(
                open = self.server.metrics().open_streams,
                "drain timed out with streams still open"
            );
        }
        drained
    }

    /// [`DrainHandle::drain`] for the configured `drain_timeout`, then a
    /// graceful stop of the HTTP server. Returns whether it drained in time.
    pub async fn drain_and_stop(&self, http: &ServerHandle) -> bool {
        let drained = self.drain(self.timeout).await;
        http.stop(true).await;
        drained
    }

    /// Whether a drain has started.
    pub fn is_draining(&self) -> bool {
        self.server.is_shutting_down()
    }

    /// The runtime root of the endpoint.
    pub fn server(&self) -> &Server {
        &self.server
    }
}
