//! `genmcp serve`: checks the flags, builds the demo (or fixture) suite on
//! the configured bus and key, and serves it over HTTP or stdio until a
//! shutdown signal has drained every stream.

use std::process::ExitCode;

use genmcp::http::{self, HttpConfig};
use genmcp_cli::node::NodeConfig;

use crate::serve_args::ServeArgs;

/// What `genmcp serve` runs, resolved from its flags.
struct Serve {
    config: HttpConfig,
    node: NodeConfig,
    conformance: bool,
    stdio: bool,
    tasks: genmcp::suite::TaskConfig,
}

/// Whether `host` names the loopback interface only.
fn is_loopback(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    bare.eq_ignore_ascii_case("localhost")
        || bare
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Takes `GENMCP_KEY` out of this process's environment: re-executes this
/// binary (same pid, same arguments) without the variable, handing the key
/// over in a file only this user can read, which the new image deletes as
/// soon as it has read it (`--key-file-once`). A safe `remove_var` does not
/// exist in edition 2024, and it would not clear `/proc/PID/environ` anyway.
/// Returns only if there was nothing to do or the re-execution failed (then
/// the key stays in the environment, with a warning). Called before any
/// thread starts.
#[cfg(unix)]
fn move_key_out_of_environment(args: &ServeArgs) {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::process::CommandExt;

    let key_env = genmcp::suite::secret::KEY_ENV;
    if std::env::var_os(key_env).is_none() || args.key_file_once.is_some() {
        return;
    }
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    let mut argv: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let mut handed = None;
    if args.key_file.is_none() {
        // An invalid key is reported by the usual path, from the variable.
        let Some(Ok(key)) = genmcp::suite::secret::secret_from_env(key_env) else {
            return;
        };
        let dir = std::path::Path::new("/dev/shm");
        let dir = if dir.is_dir() {
            dir.to_path_buf()
        } else {
            std::env::temp_dir()
        };
        let mut nonce = [0u8; 8];
        let _ = getrandom::fill(&mut nonce);
        let path = dir.join(format!(
            "genmcp-key-{}-{:016x}",
            std::process::id(),
            u64::from_le_bytes(nonce)
        ));
        let hex: String = data_encoding::HEXLOWER.encode(&key);
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .and_then(|mut f| f.write_all(hex.as_bytes()));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&path);
            tracing::warn!(error = %e, "cannot hand {key_env} over in a file: it stays in the environment; prefer --key-file");
            return;
        }
        argv.push("--key-file-once".into());
        argv.push(path.clone().into());
        handed = Some(path);
    }
    let e = std::process::Command::new(exe)
        .args(argv)
        .env_remove(key_env)
        .exec();
    if let Some(path) = handed {
        let _ = std::fs::remove_file(path);
    }
    tracing::warn!(error = %e, "cannot re-execute without {key_env}: it stays in the environment; prefer --key-file");
}

#[cfg(not(unix))]
fn move_key_out_of_environment(_args: &ServeArgs) {}

/// Runs `genmcp serve`; the exit code says how it ended (2: bad flags or
/// files).
pub(crate) fn run(args: ServeArgs) -> ExitCode {
    move_key_out_of_environment(&args);
    let mut config = args.http_config();
    match args.auth_config() {
        Ok(auth) => config.auth = auth,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    }
    let skills = match &args.skills {
        None if args.conformance => Some(genmcp_cli::fixtures::skills::skills()),
        None => None,
        Some(dir) => match genmcp::suite::Skills::from_dir(dir) {
            Ok(skills) => {
                tracing::info!(dir = %dir.display(), skills = skills.len(), "serving skills");
                Some(skills.directory_read(true))
            }
            Err(e) => {
                eprintln!("error: --skills: {e}");
                return ExitCode::from(2);
            }
        },
    };
    let skills_poll = match (&args.skills, args.skills_poll) {
        (Some(_), Some(every)) => Some(every),
        (Some(_), None) => Some(std::time::Duration::from_secs(2)),
        (None, _) => None,
    };
    let apps = args.apps;
    let serve = Serve {
        config,
        node: args.node_config(),
        conformance: args.conformance,
        stdio: args.stdio,
        tasks: args.task_config(),
    };
    if !serve.stdio
        && !is_loopback(&serve.config.host)
        && serve.config.assigns.is_none()
        && serve.config.auth.is_none()
    {
        tracing::warn!(
            host = %serve.config.host,
            "!!! binding a non-loopback address with NO authentication configured: any \
             client that can reach this port can call every tool, including the demo's \
             `burst` and catalog-changing tools (meant for loopback benchmarking only). \
             Put an authenticating proxy in front, or bind 127.0.0.1 !!!"
        );
        eprintln!(
            "WARNING: genmcp is serving {} without authentication; see --help",
            serve.config.host
        );
    }
    let key_set = match serve.node.keys() {
        Ok(keys) => keys,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let secret = key_set.as_ref().map(genmcp::suite::KeySet::current_key);
    // The bus's keys follow the key set (re-read on SIGHUP with it).
    let bus_keys = key_set.as_ref().map(genmcp::suite::KeySet::bus_keys);
    // The file stays to be re-read on SIGHUP unless it was a one-shot hand-over.
    let reload_from = serve
        .node
        .key_file
        .clone()
        .filter(|_| !serve.node.remove_key_file);
    let key_check_every = args
        .key_check_every
        .unwrap_or(genmcp::suite::DEFAULT_FLEET_KEYS_EVERY);
    let system = actix_rt::System::new();
    let stdio = serve.stdio;
    let result = system.block_on(async move {
        let mut serve = serve;
        // The watcher ends with the last clone of the skills (the suite's).
        if let (Some(skills), Some(every)) = (&skills, skills_poll) {
            drop(skills.watch(every));
        }
        let bus = serve
            .node
            .bus_with_keys(bus_keys.clone())
            .await
            .map_err(std::io::Error::other)?;
        if let Some(keys) = bus.once() {
            // A result must fit in one bus message to reach the other nodes.
            serve.tasks.fits_bus(keys.max_payload()).map_err(|e| {
                std::io::Error::other(format!(
                    "--max-task-result-bytes with --bus: {e}; lower --max-task-result-bytes"
                ))
            })?;
        }
        if bus.is_distributed()
            && let Some(admin) = serve.config.admin.take()
        {
            // /readyz answers 503 "down: bus" while Redis is not connected.
            let health = bus.clone();
            serve.config.admin = Some(admin.check("bus", move || health.is_connected()));
        }
        // With --bus and configured keys: /readyz answers 503 "down: keys"
        // while this node's key set disagrees with the other nodes'.
        let fleet = crate::keys::FleetSlot::default();
        let fleet_once = bus.once().filter(|_| key_set.is_some());
        if fleet_once.is_some()
            && let Some(admin) = serve.config.admin.take()
        {
            let slot = fleet.clone();
            serve.config.admin = Some(admin.check("keys", move || slot.in_step()));
        }
        let stdio_config = {
            let mut c = genmcp::transport::stdio::StdioConfig::default();
            c.limits = serve.config.limits.clone();
            c
        };
        // With --bus redis://…, spent requestStates are recorded in Redis.
        let spent = genmcp::suite::shared_spent::RedisSpentRecord::for_bus(&bus);
        match (serve.conformance, serve.stdio) {
            (true, false) => {
                let suite = genmcp_cli::fixtures::suite_for_node_with_skills(
                    secret,
                    spent,
                    serve.tasks,
                    Some(&bus),
                    skills,
                );
                crate::keys::install(suite.sealing_keys(), key_set, reload_from, bus_keys);
                fleet
                    .start(fleet_once, suite.sealing_keys(), key_check_every)
                    .await;
                http::serve(suite, serve.config).await
            }
            (true, true) => {
                let suite = genmcp_cli::fixtures::suite_for_node_with_skills(
                    secret,
                    spent,
                    serve.tasks,
                    Some(&bus),
                    skills,
                );
                crate::keys::install(suite.sealing_keys(), key_set, reload_from, bus_keys);
                fleet
                    .start(fleet_once, suite.sealing_keys(), key_check_every)
                    .await;
                genmcp::transport::stdio::serve(suite, stdio_config).await
            }
            (false, false) => {
                let suite =
                    genmcp_cli::demo::suite_with_options(bus, secret, serve.tasks, skills, apps).0;
                crate::keys::install(suite.sealing_keys(), key_set, reload_from, bus_keys);
                fleet
                    .start(fleet_once, suite.sealing_keys(), key_check_every)
                    .await;
                http::serve(suite, serve.config).await
            }
            (false, true) => {
                let suite =
                    genmcp_cli::demo::suite_with_options(bus, secret, serve.tasks, skills, apps).0;
                crate::keys::install(suite.sealing_keys(), key_set, reload_from, bus_keys);
                fleet
                    .start(fleet_once, suite.sealing_keys(), key_check_every)
                    .await;
                genmcp::transport::stdio::serve(suite, stdio_config).await
            }
        }
    });
    if let Err(e) = &result {
        eprintln!("error: {e}");
    }
    if stdio {
        // tokio reads stdin on a blocking thread that a shutdown cannot interrupt;
        // everything is flushed, so leave without waiting for it (after the
        // OTLP export, if any, sent what it buffered).
        genmcp_cli::logging::shutdown_export();
        std::process::exit(if result.is_ok() { 0 } else { 1 });
    }
    if result.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

#[cfg(test)]
mod tests {
    use super::is_loopback;

    #[test]
    fn loopback_hosts_are_recognised() {
        for h in [
            "127.0.0.1",
            "127.1.2.3",
            "::1",
            "[::1]",
            "localhost",
            "LOCALHOST",
        ] {
            assert!(is_loopback(h), "{h}");
        }
        for h in ["0.0.0.0", "::", "10.0.0.1", "example.com"] {
            assert!(!is_loopback(h), "{h}");
        }
    }
}
