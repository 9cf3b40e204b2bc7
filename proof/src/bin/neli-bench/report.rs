//! The results: medians and p99 by scenario and contender, as a markdown
//! report (printed too), a CSV of every sample and an SVG strip chart.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;

use crate::Args;

/// Samples, by (scenario, contender).
#[derive(Default)]
pub struct Results {
    samples: BTreeMap<(String, String), Vec<f64>>,
    /// What was skipped or failed, printed under the table.
    pub notes: Vec<String>,
}

impl Results {
    /// One sample of `scenario` for `contender`.
    pub fn add(&mut self, scenario: &str, contender: &str, value: f64) {
        self.samples.entry((scenario.into(), contender.into())).or_default().push(value);
    }

    fn median(&self, scenario: &str, contender: &str) -> Option<f64> {
        let mut v = self.samples.get(&(scenario.to_string(), contender.to_string()))?.clone();
        v.sort_by(f64::total_cmp);
        Some(v[v.len() / 2])
    }

    fn p99(&self, scenario: &str, contender: &str) -> Option<f64> {
        let mut v = self.samples.get(&(scenario.to_string(), contender.to_string()))?.clone();
        v.sort_by(f64::total_cmp);
        Some(v[((v.len() - 1) as f64 * 0.99).round() as usize])
    }
}

/// The unit of a row, from its scenario name.
fn unit(scenario: &str) -> &'static str {
    if scenario.contains(" req/s ") {
        "req/s"
    } else if scenario.ends_with("cpu") {
        "s"
    } else if scenario.ends_with("cpu%") {
        "% of a core"
    } else if scenario.ends_with("rss") || scenario.ends_with("pss") {
        "MiB"
    } else if scenario.contains("overlaps")
        || scenario.contains("still running")
        || scenario.ends_with(" stops")
        || scenario.ends_with(" handovers")
        || scenario.ends_with(" kept")
        || scenario.ends_with(" joins")
        || scenario.ends_with(" starts")
        || scenario.ends_with(" exits")
        || scenario.contains(" per member")
        || scenario.ends_with(" twice")
        || scenario.ends_with(" moved")
        || scenario.ends_with(" skipped")
    {
        "count"
    } else {
        "ms"
    }
}

/// Prints the markdown report and writes it, the CSV and the SVG chart
/// into --out.
pub fn report(args: &Args, results: &Results, contenders: &[&str]) {
    let md = markdown(args, results, contenders);
    println!("{md}");
    let _ = fs::write(args.out.join("report.md"), &md);

    let mut csv = String::from("scenario,unit,contender,sample,value\n");
    for ((s, c), v) in &results.samples {
        for (i, x) in v.iter().enumerate() {
            let _ = writeln!(csv, "{s},{},{c},{i},{x:.3}", unit(s));
        }
    }
    let _ = fs::write(args.out.join("bench.csv"), csv);
    let _ = fs::write(args.out.join("latency.svg"), svg(results, contenders));
    eprintln!("neli-bench: wrote {0}/report.md, {0}/bench.csv, {0}/latency.svg", args.out.display());
}

/// The machine, the settings, and a table of medians (p99) by scenario
/// and contender, with neli-run's ratio to etcd when etcd ran.
fn markdown(args: &Args, results: &Results, contenders: &[&str]) -> String {
    let mut md = String::new();
    let cpu = fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_default();
    let kernel = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let _ = writeln!(md, "## neli-bench\n");
    let _ = writeln!(
        md,
        "Machine: {cores} cores ({cpu}), Linux {}. Session timeout / TTL {}, {} repetitions, medians (p99 in brackets).\n",
        kernel.trim(),
        match args.product_defaults {
            true => "6s (neli-run's defaults, no timing flags)".to_string(),
            false => format!("{} (other timings scaled)", args.session_timeout),
        },
        args.reps
    );
    let _ = write!(md, "| scenario | unit |");
    for c in contenders {
        let _ = write!(md, " {c} |");
    }
    let etcd = contenders.iter().position(|c| *c == "etcdctl-lock");
    if etcd.is_some() {
        let _ = write!(md, " neli-run/etcd |");
    }
    let _ = writeln!(md);
    let _ = writeln!(md, "|---|---|{}{}", "---|".repeat(contenders.len()), if etcd.is_some() { "---|" } else { "" });
    let mut scenarios: Vec<&String> = results.samples.keys().map(|(s, _)| s).collect();
    scenarios.dedup();
    let order = [
        "startup",
        "graceful",
        "crash",
        "fence",
        "blip",
        "sweep",
        "idle",
        "scale",
        "roles-leave",
        "roles-crash",
        "roles-scale",
        "roles-scale idle",
        "rolling-restart",
        "leader-move",
        "coordinator-move",
        "leader-crash",
        "coordinator-crash",
        "coordinator-cut",
        "leader-cut",
    ];
    // The longest name a row starts with ranks it (`roles-scale idle` after
    // `roles-scale`).
    let rank = |s: &str| {
        let named = order.iter().enumerate().filter(|(_, o)| s.starts_with(*o));
        named.max_by_key(|(_, o)| o.len()).map_or(order.len(), |(i, _)| i)
    };
    // Requests per second after the rest of their scenario, by API, each
    // API's roles side by side (`all`, lower case, last).
    let by_api = |s: &str| s.split_once(" req/s ").map(|(role, api)| (api.to_string(), role.to_string()));
    scenarios.sort_by_key(|s| (rank(s), by_api(s), s.len(), s.to_string()));
    scenarios.dedup();
    for s in &scenarios {
        let u = unit(s);
        let _ = write!(md, "| {s} | {u} |");
        for c in contenders {
            let cell = match (results.median(s, c), results.p99(s, c)) {
                // A sweep takes a few milliseconds: tenths tell them apart.
                (Some(m), Some(p)) if u == "ms" && s.starts_with("sweep") => format!("{m:.1} ({p:.1})"),
                (Some(m), Some(p)) if u == "ms" => format!("{m:.0} ({p:.0})"),
                (Some(_), _) if u == "count" => {
                    let total: f64 = results.samples[&(s.to_string(), c.to_string())].iter().sum();
                    format!("{total:.0} of {}", results.samples[&(s.to_string(), c.to_string())].len())
                }
                // One sample per member: the median member and the p99.
                (Some(m), Some(p)) if s.contains(" idle member ") => format!("{m:.3} ({p:.3})"),
                (Some(m), _) => format!("{m:.3}"),
                _ => "-".into(),
            };
            let _ = write!(md, " {cell} |");
        }
        if etcd.is_some() {
            let e = results.median(s, "etcdctl-lock");
            let ratios: Vec<String> = contenders
                .iter()
                .filter(|c| c.starts_with("neli-run"))
                .filter_map(|c| Some(format!("{:.2}", results.median(s, c)? / e.filter(|e| *e > 0.0)?)))
                .collect();
            let _ =
                write!(md, " {} |", if u == "count" || ratios.is_empty() { "-".into() } else { ratios.join(" / ") });
        }
        let _ = writeln!(md);
    }
    for n in &results.notes {
        let _ = writeln!(md, "\nNote: {n}");
    }
    md
}

/// A strip chart of every latency sample (log scale), one row per scenario
/// and contender, with the median marked.
fn svg(results: &Results, contenders: &[&str]) -> String {
    let rows: Vec<(&String, &str, &Vec<f64>)> = results
        .samples
        .iter()
        .filter(|((s, _), _)| unit(s) == "ms" && !s.contains("excess"))
        .map(|((s, c), v)| (s, c.as_str(), v))
        .collect();
    let (left, width, row_h) = (260.0, 600.0, 22.0);
    let height = 60.0 + row_h * rows.len() as f64;
    let (lo, hi) = (1.0f64, 100_000.0f64);
    let x = |v: f64| left + (v.max(lo).ln() - lo.ln()) / (hi.ln() - lo.ln()) * width;
    let colour = |c: &str| match contenders.iter().position(|x| *x == c) {
        Some(0) => "#1f77b4",
        Some(1) => "#2ca02c",
        _ => "#d62728",
    };
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{height}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"10\" y=\"18\" font-size=\"14\">neli-bench: latency samples (ms, log scale; bar = median)</text>\n",
        left + width + 40.0
    );
    for t in [1.0, 10.0, 100.0, 1000.0, 10_000.0, 100_000.0] {
        let _ = writeln!(
            out,
            "<line x1=\"{0:.1}\" y1=\"30\" x2=\"{0:.1}\" y2=\"{1:.1}\" stroke=\"#ddd\"/><text x=\"{0:.1}\" y=\"{2:.1}\" text-anchor=\"middle\">{t}</text>",
            x(t),
            height - 25.0,
            height - 10.0
        );
    }
    for (i, (s, c, v)) in rows.iter().enumerate() {
        let y = 40.0 + row_h * i as f64;
        let _ = writeln!(out, "<text x=\"10\" y=\"{:.1}\" fill=\"{}\">{s} · {c}</text>", y + 4.0, colour(c));
        for val in v.iter() {
            let _ = writeln!(
                out,
                "<circle cx=\"{:.1}\" cy=\"{y:.1}\" r=\"3\" fill=\"{}\" fill-opacity=\"0.6\"/>",
                x(*val),
                colour(c)
            );
        }
        let mut sorted = (*v).clone();
        sorted.sort_by(f64::total_cmp);
        let m = x(sorted[sorted.len() / 2]);
        let _ = writeln!(
            out,
            "<line x1=\"{m:.1}\" y1=\"{:.1}\" x2=\"{m:.1}\" y2=\"{:.1}\" stroke=\"black\" stroke-width=\"2\"/>",
            y - 8.0,
            y + 8.0
        );
    }
    out.push_str("</svg>\n");
    out
}
