//! Readiness: the drain and a list of named checks.

use std::sync::Arc;

use crate::runtime::Server;

/// Whether a dependency is up, asked on every `GET /readyz`. It must answer at
/// once (read a flag the dependency's client keeps, never do I/O here).
pub type ReadinessCheck = Arc<dyn Fn() -> bool + Send + Sync>;

/// The answer of `GET /readyz`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Readiness {
    /// Accepting listens: 200.
    Ready,
    /// A graceful shutdown runs: new listens are refused. 503.
    Draining,
    /// These named checks failed. 503.
    Down(Vec<String>),
}

impl Readiness {
    /// Whether the process accepts listens.
    pub fn is_ready(&self) -> bool {
        matches!(self, Readiness::Ready)
    }

    /// The response body: `ready`, `draining`, or `down: NAME[, NAME...]`.
    pub fn describe(&self) -> String {
        match self {
            Readiness::Ready => "ready".into(),
            Readiness::Draining => "draining".into(),
            Readiness::Down(names) => format!("down: {}", names.join(", ")),
        }
    }
}

/// The draining flag of `server`, then every check in order.
pub(super) fn readiness(server: &Server, checks: &[(String, ReadinessCheck)]) -> Readiness {
    if server.is_shutting_down() {
        return Readiness::Draining;
    }
    let down: Vec<String> = checks
        .iter()
        .filter(|(_, check)| !check())
        .map(|(name, _)| name.clone())
        .collect();
    if down.is_empty() {
        Readiness::Ready
    } else {
        Readiness::Down(down)
    }
}
