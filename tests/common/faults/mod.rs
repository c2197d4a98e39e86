//! A Jepsen-style fault-injection suite for a genmcp fleet (docs/faults.md).
//!
//! Three parts kept apart, joined only by the recorded [`history::History`]:
//! - the **workload** ([`workload`]): clients creating, answering, cancelling
//!   and reading tasks on every node, 2025-11-25 sessions through a
//!   per-request round-robin [`proxy`], and 2026 listens with `taskIds` and
//!   resource filters; each operation recorded with its invoke and complete
//!   times, node and outcome (ok / failed / unknown);
//! - the **nemeses** ([`nemesis`]): faults on a schedule drawn from a seed
//!   (cut Redis connections, restart Redis, pause Redis, stop / kill a node,
//!   a cluster failover), recorded in the same history;
//! - the **checker** ([`checker`]): each invariant a function of the whole
//!   history, returning the violations it finds.
//!
//! The processes ([`cluster`]: Redis and `genmcp serve --bus` nodes) are
//! killed on drop; the history is written as JSON lines so a violation can be
//! read back.
#![allow(dead_code)]

pub mod checker;
pub mod cluster;
pub mod history;
pub mod http;
pub mod nemesis;
pub mod proxy;
pub mod rng;
pub mod run;
pub mod workload;

#[cfg(test)]
mod checker_tests;
