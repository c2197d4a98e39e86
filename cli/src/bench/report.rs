//! The rounds of a run by column, and the text table printed on stdout.

use super::{Baseline, BenchConfig, Kind, Mode, Round, Sample, figure};

/// The rounds of one run, one [`Sample`] per column per round.
#[derive(Clone, Debug)]
pub struct Results {
    /// Each column's key in the JSON file: `baseline` and `genmcp`;
    /// `one_node` and `three_nodes` (cross-node); `server` (`--url`).
    pub keys: Vec<&'static str>,
    /// Each column's title for people (and the series names of the chart).
    pub titles: Vec<String>,
    /// One sample per column, per round.
    pub rounds: Vec<Vec<Sample>>,
}

/// The baseline's title in the table, the JSON file and the chart.
fn baseline_title(kind: Baseline) -> &'static str {
    match kind {
        Baseline::Raw => "baseline (raw SSE)",
        Baseline::ActorHop => "baseline (raw SSE, actor hop)",
        Baseline::ActorHopHandler => "baseline (raw SSE, actor hop as a StreamHandler)",
    }
}

impl Results {
    /// The rounds of a baseline-and-genmcp (or cross-node) run.
    pub fn from_rounds(cfg: &BenchConfig, rounds: &[Round]) -> Results {
        let (keys, titles) = if cfg.cross_node.is_some() {
            (
                vec!["one_node", "three_nodes"],
                vec![
                    "one node (listen + burst)".to_owned(),
                    "three nodes (burst on 1, listen on 2 and 3)".to_owned(),
                ],
            )
        } else {
            (
                vec!["baseline", "genmcp"],
                vec![baseline_title(cfg.baseline).to_owned(), "genmcp".to_owned()],
            )
        };
        Results {
            keys,
            titles,
            rounds: rounds.iter().map(|r| vec![r.baseline, r.genmcp]).collect(),
        }
    }

    /// The rounds of one server (`--url`).
    pub fn single(title: &str, samples: Vec<Sample>) -> Results {
        Results {
            keys: vec!["server"],
            titles: vec![title.to_owned()],
            rounds: samples.into_iter().map(|s| vec![s]).collect(),
        }
    }

    /// What the ratio is called (`genmcp/baseline`, `three/one`), when the
    /// run has two columns.
    pub fn ratio_name(&self) -> Option<&'static str> {
        match self.keys[..] {
            ["baseline", "genmcp"] => Some("genmcp/baseline"),
            [_, _] => Some("three/one"),
            _ => None,
        }
    }

    /// The second column's figure over the first's, per round.
    pub fn ratios(&self, mode: Mode) -> Vec<f64> {
        if self.keys.len() != 2 {
            return Vec::new();
        }
        self.rounds
            .iter()
            .map(|r| figure(mode, &r[1]) / figure(mode, &r[0]))
            .collect()
    }

    /// The table printed on stdout, with the median ratio.
    pub fn table(&self, cfg: &BenchConfig) -> String {
        let mut mode = mode_name(cfg.mode).to_owned();
        if cfg.cross_node.is_some() {
            mode.push_str(" across nodes");
        }
        let mut columns = self.titles.join(" | ");
        if let Some(name) = self.ratio_name() {
            columns.push_str(&format!(" | ratio {name}"));
        }
        let load = if cfg.mode == Mode::Memory && cfg.events > 0 {
            format!("{} streams, idle after {} events", cfg.streams, cfg.events)
        } else if cfg.mode == Mode::Memory {
            format!("{} streams", cfg.streams)
        } else if cfg.mode == Mode::Latency {
            format!(
                "{} streams × {} events at {}/s",
                cfg.streams, cfg.events, cfg.rate
            )
        } else {
            format!("{} streams × {} events", cfg.streams, cfg.events)
        };
        let mut out = format!(
            "{mode} · {load} · {} · {} rounds\nround | {columns}\n",
            kind_name(cfg.kind),
            self.rounds.len()
        );
        let ratios = self.ratios(cfg.mode);
        for (i, r) in self.rounds.iter().enumerate() {
            let cells: Vec<String> = r.iter().map(|s| cell(cfg.mode, s)).collect();
            out.push_str(&format!("{} | {}", i + 1, cells.join(" | ")));
            if let Some(ratio) = ratios.get(i) {
                out.push_str(&format!(" | {ratio:.2}"));
            }
            out.push('\n');
        }
        if let (Some(name), Some(m)) = (self.ratio_name(), median(ratios)) {
            out.push_str(&format!("median ratio {name}: {m:.2}\n"));
        }
        if cfg.mode != Mode::Memory {
            out.push_str(&self.client_line(cfg.mode));
        }
        out
    }

    /// How busy the load generator was: the most CPU it used in a
    /// measurement, and the least it would take to saturate it.
    /// (Latency mode: the busiest only; the client waits for events there,
    /// so frames per CPU second say nothing of what it could take.)
    fn client_line(&self, mode: Mode) -> String {
        let all = self.rounds.iter().flatten().filter(|s| s.client_cpu > 0.0);
        let busiest = all.clone().map(|s| s.client_cpu).fold(0.0, f64::max);
        let capacity = all
            .map(|s| s.frames as f64 / s.elapsed.as_secs_f64() / s.client_cpu)
            .fold(f64::INFINITY, f64::min);
        if busiest > 0.0 && mode == Mode::Latency {
            format!("load generator: at most {busiest:.2} cores busy while receiving\n")
        } else if busiest > 0.0 {
            format!(
                "load generator: at most {busiest:.2} cores busy while receiving; \
                 capacity at least {:.1} M frames/s\n",
                capacity / 1e6
            )
        } else {
            String::new()
        }
    }
}

/// The rounds as a table, with the median ratio genmcp / baseline.
pub fn report(cfg: &BenchConfig, rounds: &[Round]) -> String {
    Results::from_rounds(cfg, rounds).table(cfg)
}

/// The median of `values` (the mean of the middle two of an even count),
/// or `None`.
pub fn median(mut values: Vec<f64>) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(values[n / 2]),
        _ => Some((values[n / 2 - 1] + values[n / 2]) / 2.0),
    }
}

/// The mode's name on the command line and in the JSON file.
pub fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Throughput => "throughput",
        Mode::Latency => "latency",
        Mode::Memory => "memory",
    }
}

/// The notification's method, without `notifications/`.
pub fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Tools => "tools/list_changed",
        Kind::Resources => "resources/updated",
    }
}

/// One sample as a table cell.
pub fn cell(mode: Mode, s: &Sample) -> String {
    match mode {
        Mode::Throughput => format!("{:.0} frames/s", s.frames_per_sec),
        Mode::Latency => format!(
            "p50 {:.2} ms, p99 {:.2} ms",
            s.p50.as_secs_f64() * 1e3,
            s.p99.as_secs_f64() * 1e3
        ),
        Mode::Memory => format!("{:.1} KiB/stream", s.kib_per_stream),
    }
}
