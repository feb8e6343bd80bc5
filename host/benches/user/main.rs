//! What users run, measured the way they run it, beside what they would use
//! instead: one command prints every row of the speed table with
//! its goal.
//!
//! `cargo bench -p corral --bench user`
//!
//! Whole-process rows start the real `corral` binary (each binary with its
//! own config, cache and data directories, warmed first unless the row is
//! about an empty cache) and its peer (`rg -j1`, `fd -j1`, `find`, curl
//! against the same mock), in interleaved rounds (A, B, peer, then rotated), and report
//! medians: CPU is user + system time of the child as `wait4` returns it,
//! wall time is from the spawn. The model is a mock OpenAI server on
//! 127.0.0.1 in this process, speaking the exact Chat Completions SSE
//! format. In-process rows (the sandboxed call, the spawn ratio, the hook)
//! use the library as the binary does, in interleaved rounds too.
//!
//! Environment:
//! - `CORRAL_BENCH_BASE=/path/to/old/corral`: the whole-process rows also
//!   run that binary, interleaved with this one, in a column of its own
//!   (in-process rows measure this build only).
//! - `CORRAL_BENCH_QUICK=1`: fewer rounds (about a third of the time, wider
//!   spread).
//! - `CORRAL_BENCH_TREE_FILES=N`: files in the search tree (default 25000,
//!   at least 20000 for the figure to count).
//! - `CORRAL_COMPONENTIZE_PY`: componentize-py for the Python plugin rows
//!   (else `${CORRAL_CI_CACHE:-~/.cache/corral-ci}/plugin-py/bin/componentize-py`).
//!
//! - `CORRAL_BENCH_MCP_REFERENCE`, `CORRAL_BENCH_MCP_RUST`: the MCP peers
//!   (the reference filesystem server's `dist/index.js`, rust-mcp-filesystem's
//!   binary); else `.ci/run`'s copy of the first, and the bench installs
//!   what is missing into `~/.cache/corral-bench` (npm, `cargo install`).
//!
//! - `CORRAL_BENCH_FD`: fd for the glob rows; else `fd` in `PATH`, else the
//!   bench builds it with `cargo install` into `~/.cache/corral-bench`.
//!
//! grep and glob run on three trees of over 20,000 files (see `tree.rs`):
//! the unpacked crates, a `node_modules` npm installs into the bench's cache
//! and part of the Linux kernel's sources `apt-get download` fetches into
//! it, both once.
//!
//! A row whose peer or tool is missing prints why and how to get it.

#[path = "../common/mod.rs"]
mod common;
mod floor;
mod mcp;
mod mock;
mod proc;
mod tree;

use common::{load, report};
use corral_core::call::Dispatcher;
use corral_core::hooks::Hooks;
use corral_runtime::{Plugins, Runtime};
use corral_sdk::Tool as _;
use mock::{Mock, Reply};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Progress, on stderr, so that stdout is the table alone.
#[expect(clippy::print_stderr, reason = "a benchmark reports its progress")]
fn note(line: &str) {
    eprintln!("{line}");
}

use common::or_die as ok;

/// Rounds per row.
struct Cfg {
    /// Cheap whole-process rows (tens of ms a run).
    rounds: usize,
    /// Rows whose runs take seconds on the base commit (resume).
    heavy: usize,
    /// grep and glob on each tree (a third of a second a run; the medians
    /// of three moved by a tenth between runs).
    search: usize,
    /// Runs on an empty compile cache (tens of ms each, the built-in
    /// plugins precompiled; the medians of two moved by a third between
    /// runs).
    first: usize,
    /// In-process rounds.
    inproc: usize,
}

/// A corral binary under test, with its own home directories.
struct Bin {
    label: &'static str,
    exe: PathBuf,
    home: PathBuf,
}

impl Bin {
    fn new(label: &'static str, exe: PathBuf, root: &Path) -> Self {
        let home = root.join(label);
        let config = home.join("config/corral");
        ok(std::fs::create_dir_all(&config));
        // The bench's projects set their policy mode and limits in the
        // project file, which a user allows this way.
        ok(std::fs::write(
            config.join("corral.toml"),
            "[trust]\nproject_may_loosen = true\n",
        ));
        Self { label, exe, home }
    }

    fn cmd(&self, ws: &Path, args: &[&str]) -> Command {
        let mut c = Command::new(&self.exe);
        c.args(args)
            .arg("--workspace")
            .arg(ws)
            .current_dir(ws)
            .env("XDG_CONFIG_HOME", self.home.join("config"))
            .env("XDG_CACHE_HOME", self.home.join("cache"))
            .env("XDG_DATA_HOME", self.home.join("data"))
            .env("BENCH_OPENAI_KEY", KEY)
            .env_remove("CORRAL_LOG")
            .env_remove("CORRAL_TOOL_CACHE")
            .env_remove("OPENAI_API_KEY")
            .env_remove("ANTHROPIC_API_KEY");
        c
    }

    /// Trusts the project manifest of `ws`.
    fn trust(&self, ws: &Path) {
        proc::run(&mut self.cmd(ws, &["trust", "--yes"])).ok(&format!("{} trust", self.label));
    }

    fn sessions(&self) -> PathBuf {
        self.home.join("data/corral/sessions")
    }
}

const KEY: &str = "sk-bench-0123456789";

/// A project whose `openai` provider talks to the mock on `port`.
fn openai_manifest(port: u16, extra: &str) -> String {
    format!(
        "[agent]\nprovider = \"openai\"\n\n[policy]\nmode = \"auto-edit\"\n\n\
         [plugins.openai]\nsource = \"builtin:openai\"\n\
         grants.net = [\"http://127.0.0.1:{port}\"]\n\
         grants.secrets = [{{ origin = \"http://127.0.0.1:{port}\", header = \"authorization\", value = \"Bearer ${{env:BENCH_OPENAI_KEY}}\" }}]\n\
         config = {{ base_url = \"http://127.0.0.1:{port}/v1\", model = \"mock\" }}\n{extra}\n"
    )
}

fn project(root: &Path, name: &str, manifest: &str, bins: &[Bin]) -> PathBuf {
    let ws = root.join(name);
    ok(std::fs::create_dir_all(&ws));
    ok(std::fs::write(ws.join("corral.toml"), manifest));
    for b in bins {
        b.trust(&ws);
    }
    ok(ws.canonicalize())
}

// ---------------------------------------------------------------- figures

fn median_d(v: &[Duration]) -> Duration {
    let mut v = v.to_vec();
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

fn median_f(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn fmt_d(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 1.0 {
        format!("{s:.2} s")
    } else if s >= 1e-3 {
        format!("{:.1} ms", s * 1e3)
    } else {
        format!("{:.1} µs", s * 1e6)
    }
}

/// "CPU, wall" medians of (cpu, wall) samples.
fn cpu_wall(samples: &[(Duration, Duration)]) -> String {
    let cpu = median_d(&samples.iter().map(|s| s.0).collect::<Vec<_>>());
    let wall = median_d(&samples.iter().map(|s| s.1).collect::<Vec<_>>());
    format!("{} CPU, {} wall", fmt_d(cpu), fmt_d(wall))
}

/// Runs `f(candidate)` for `rounds` rounds over `k` candidates, each round
/// starting one candidate later (A B C, B C A, …), so that drift on a shared
/// machine falls on every candidate alike.
fn interleave<T>(rounds: usize, k: usize, mut f: impl FnMut(usize) -> T) -> Vec<Vec<T>> {
    let mut out: Vec<Vec<T>> = (0..k).map(|_| Vec::new()).collect();
    for r in 0..rounds {
        for i in 0..k {
            let c = (r + i) % k;
            out[c].push(f(c));
        }
    }
    out
}

#[derive(Clone, Copy)]
enum Goal {
    AtMost(f64),
    AtLeast(f64),
}

impl Goal {
    fn met(self, v: f64) -> bool {
        match self {
            Goal::AtMost(g) => v <= g,
            Goal::AtLeast(g) => v >= g,
        }
    }
}

/// One line of the table.
struct Row {
    what: String,
    /// Per binary (this build, then the base): what was measured.
    bins: Vec<String>,
    peer: String,
    /// Per binary: the figure the goal is about, and its value.
    figures: Vec<(String, f64)>,
    goal_text: String,
    goal: Goal,
    /// Why the row was not measured.
    skipped: Option<String>,
}

impl Row {
    fn skipped(what: &str, goal_text: &str, why: String) -> Self {
        note(&format!("  skipped: {why}"));
        Self {
            what: what.into(),
            bins: Vec::new(),
            peer: String::new(),
            figures: Vec::new(),
            goal_text: goal_text.into(),
            goal: Goal::AtMost(0.0),
            skipped: Some(why),
        }
    }
}

fn print_table(rows: &[Row], labels: &[&str]) {
    let base = labels.len() > 1;
    let mut head = String::from("| row | corral |");
    let mut rule = String::from("| --- | --- |");
    if base {
        head.push_str(" base |");
        rule.push_str(" --- |");
    }
    head.push_str(" peer | ratio / figure |");
    rule.push_str(" --- | --- |");
    if base {
        head.push_str(" base figure |");
        rule.push_str(" --- |");
    }
    head.push_str(" goal | met? |");
    rule.push_str(" --- | --- |");
    report(&head);
    report(&rule);
    for r in rows {
        let cell = |v: &[String], i: usize| v.get(i).cloned().unwrap_or_else(|| "—".into());
        let mut line = format!("| {} | ", r.what);
        if let Some(why) = &r.skipped {
            line.push_str("skipped |");
            if base {
                line.push_str(" skipped |");
            }
            line.push_str(&format!(" — | {why} |"));
            if base {
                line.push_str(" — |");
            }
            line.push_str(&format!(" {} | — |", r.goal_text));
            report(&line);
            continue;
        }
        line.push_str(&cell(&r.bins, 0));
        line.push_str(" |");
        if base {
            line.push_str(&format!(" {} |", cell(&r.bins, 1)));
        }
        let figs: Vec<String> = r.figures.iter().map(|f| f.0.clone()).collect();
        line.push_str(&format!(" {} | {} |", r.peer, cell(&figs, 0)));
        if base {
            line.push_str(&format!(" {} |", cell(&figs, 1)));
        }
        let met = match r.figures.first() {
            Some((_, v)) if r.goal.met(*v) => "yes",
            Some(_) => "no",
            None => "—",
        };
        line.push_str(&format!(" {} | {met} |", r.goal_text));
        report(&line);
    }
}

// ---------------------------------------------------------------- main

fn main() {
    // `cargo test --benches` runs this without `--bench`; the bench takes
    // minutes, so it runs only under `cargo bench`.
    if !std::env::args().any(|a| a == "--bench") {
        note("the user bench runs under `cargo bench -p corral --bench user`; skipped");
        return;
    }
    let quick = std::env::var_os("CORRAL_BENCH_QUICK").is_some_and(|v| v != "0" && !v.is_empty());
    let cfg = if quick {
        Cfg {
            rounds: 3,
            heavy: 1,
            search: 3,
            first: 3,
            inproc: 5,
        }
    } else {
        Cfg {
            rounds: 7,
            heavy: 3,
            search: 7,
            first: 7,
            inproc: 15,
        }
    };
    let started = Instant::now();
    let root = ok(tempfile::Builder::new()
        .prefix("corral-bench-user-")
        .tempdir());
    let mut bins = vec![Bin::new(
        "corral",
        PathBuf::from(env!("CARGO_BIN_EXE_corral")),
        root.path(),
    )];
    if let Some(base) = std::env::var_os("CORRAL_BENCH_BASE") {
        let base = PathBuf::from(base);
        if !base.is_file() {
            panic!(
                "CORRAL_BENCH_BASE={} is not a file: give the path of an older corral binary",
                base.display()
            );
        }
        bins.push(Bin::new("base", base, root.path()));
    }
    let labels: Vec<&str> = bins.iter().map(|b| b.label).collect();
    let files: usize = std::env::var("CORRAL_BENCH_TREE_FILES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(25_000);
    note(&format!(
        "corral user bench: {} ({}); rounds {} / heavy {} / empty cache {}",
        bins.iter()
            .map(|b| format!("{}={}", b.label, b.exe.display()))
            .collect::<Vec<_>>()
            .join(", "),
        if quick { "quick" } else { "full" },
        cfg.rounds,
        cfg.heavy,
        cfg.first
    ));

    // CORRAL_BENCH_ONLY=grep,hook runs only those rows (to look at one).
    let only: Option<Vec<String>> = std::env::var("CORRAL_BENCH_ONLY")
        .ok()
        .map(|v| v.split(',').map(|s| s.trim().to_owned()).collect());
    let want = |key: &str| only.as_ref().is_none_or(|o| o.iter().any(|k| k == key));
    let mut rows = Vec::new();
    if want("first") {
        rows.extend(first_run(&cfg, &bins, root.path()));
    }
    let (rt, _cache, runtime) = common::engine();
    let trees = search_trees(want("grep") || want("glob"), want("list"), files);
    let on = On {
        cfg: &cfg,
        rt: &rt,
        bins: &bins,
    };
    if want("grep") {
        rows.extend(trees.iter().map(|(name, t)| grep(&on, name, t)));
    }
    if want("glob") {
        rows.extend(trees.iter().map(|(name, t)| glob(&on, name, t)));
    }
    if want("call") {
        rows.extend(sandboxed_call(&cfg, &rt, &runtime));
        rows.push(first_instruction(&cfg, &rt, &runtime));
    }
    if want("ttft") {
        rows.push(first_token(&cfg, &bins, root.path()));
    }
    if want("loop") {
        rows.push(loop_overhead(&cfg, &bins, root.path()));
    }
    if want("resume") {
        rows.push(resume(&cfg, &bins, root.path()));
    }
    if want("sse") {
        rows.push(sse(&cfg, &bins, root.path()));
    }
    if want("python") {
        rows.extend(python(&cfg, &bins, root.path()));
    }
    if want("list") {
        let crates = trees.first().map(|(_, t)| t);
        rows.push(list_files(
            &cfg,
            &rt,
            &bins,
            crates.unwrap_or(&Err("no tree".into())),
        ));
    }
    if want("hook") {
        rows.push(hook(&cfg, &rt, &runtime));
    }
    if want("mcp") {
        rows.extend(mcp::rows(&cfg, &bins, &rt, &runtime));
    }

    let (y, mo, d, h, mi, _) = corral_core::log::civil(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    );
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines().find_map(|l| {
                l.strip_prefix("model name")
                    .map(|m| m.trim_start_matches([' ', '\t', ':']).to_owned())
            })
        })
        .unwrap_or_else(|| "unknown CPU".into());
    report("");
    report(&format!(
        "`cargo bench -p corral --bench user`{}{}, {y:04}-{mo:02}-{d:02} {h:02}:{mi:02} UTC, {cpus} CPUs ({model}), {:.0} s; medians of interleaved rounds, CPU = user+sys of the whole process",
        if bins.len() > 1 {
            " with CORRAL_BENCH_BASE"
        } else {
            ""
        },
        if quick { ", CORRAL_BENCH_QUICK=1" } else { "" },
        started.elapsed().as_secs_f64()
    ));
    report("");
    print_table(&rows, &labels);
}

// ---------------------------------------------------------------- rows

/// `corral tools list`, `corral run` to its first request and `corral mcp
/// serve` to its `initialize` answer, each on an empty compile cache.
fn first_run(cfg: &Cfg, bins: &[Bin], root: &Path) -> Vec<Row> {
    note("first run on an empty compile cache…");
    let mock = Mock::start(|_, _| Reply::Sse(mock::text(&["ok"])));
    let ws = project(root, "first", &openai_manifest(mock.port, ""), bins);
    let goal = "≤ 1 s";
    let initialize = format!(
        "{}\n",
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "corral-bench", "version": "0"}}})
    );
    let mut rows = Vec::new();
    // Per binary, each first `tools list`'s peak and the next (warm) one's.
    let mut peaks: Vec<Vec<(u64, u64)>> = vec![Vec::new(); bins.len()];
    for (what, kind) in [
        ("first run, empty cache: `corral tools list`", 0),
        (
            "first run, empty cache: `corral run` to its first request",
            1,
        ),
        (
            "first run, empty cache: `corral mcp serve` to `initialize` answered",
            2,
        ),
    ] {
        note(&format!("  {what}"));
        let times = interleave(cfg.first, bins.len(), |i| {
            let b = &bins[i];
            let cache = ok(tempfile::Builder::new()
                .prefix("empty-cache-")
                .tempdir_in(&b.home));
            let mut cmd = match kind {
                0 => b.cmd(&ws, &["tools", "list"]),
                1 => b.cmd(&ws, &["run", "hello"]),
                _ => b.cmd(&ws, &["mcp", "serve"]),
            };
            cmd.env("XDG_CACHE_HOME", cache.path());
            mock.clear();
            let (wall, f) = match kind {
                0 => {
                    let f = proc::run(&mut cmd).ok(what);
                    // The same command again, the cache now filled: a
                    // warm run's peak beside the first run's.
                    let mut again = b.cmd(&ws, &["tools", "list"]);
                    again.env("XDG_CACHE_HOME", cache.path());
                    let warm = proc::run(&mut again).ok(what);
                    peaks[i].push((f.peak_kib, warm.peak_kib));
                    (f.wall(), f)
                }
                1 => {
                    let r = proc::start(&mut cmd, None, false);
                    let at = mock.wait_arrival(1, Duration::from_secs(170));
                    let f = r.finish().ok(what);
                    let at = at.unwrap_or_else(|| panic!("{what}: no request reached the mock"));
                    (at - f.started, f)
                }
                _ => {
                    let mut r = proc::start(&mut cmd, Some(b"\"protocolVersion\""), true);
                    r.send(initialize.as_bytes());
                    let at = r.wait_marker(Duration::from_secs(170));
                    let started = r.started();
                    let f = r.finish();
                    let at = at.unwrap_or_else(|| {
                        panic!(
                            "{what}: no answer to initialize: {}",
                            String::from_utf8_lossy(&f.stderr)
                        )
                    });
                    (at - started, f)
                }
            };
            // Until the first byte on stdout or stderr the screen is blank.
            let blank = f.first_output.map_or(f.wall(), |t| t - f.started);
            (wall, f.cpu, blank)
        });
        let figures: Vec<(String, f64)> = times
            .iter()
            .map(|t| {
                let w = median_d(&t.iter().map(|x| x.0).collect::<Vec<_>>());
                (fmt_d(w), w.as_secs_f64())
            })
            .collect();
        let cells = times
            .iter()
            .map(|t| {
                let c = median_d(&t.iter().map(|x| x.1).collect::<Vec<_>>());
                let blank = median_d(&t.iter().map(|x| x.2).collect::<Vec<_>>());
                format!("{} CPU, first output at {}", fmt_d(c), fmt_d(blank))
            })
            .collect();
        rows.push(Row {
            what: what.into(),
            bins: cells,
            peer: "—".into(),
            figures,
            goal_text: goal.into(),
            goal: Goal::AtMost(1.0),
            skipped: None,
        });
        if kind == 0 {
            rows.push(first_peak(&peaks));
        }
    }
    rows
}

/// The first run's peak memory against a warm run's, from each binary's
/// pairs of `tools list` peaks (KiB).
fn first_peak(peaks: &[Vec<(u64, u64)>]) -> Row {
    let medians: Vec<(f64, f64)> = peaks
        .iter()
        .map(|p| {
            let mib =
                |v: Vec<u64>| median_f(&v.iter().map(|k| *k as f64 / 1024.0).collect::<Vec<_>>());
            (
                mib(p.iter().map(|x| x.0).collect()),
                mib(p.iter().map(|x| x.1).collect()),
            )
        })
        .collect();
    Row {
        what: "first run's peak memory ÷ a warm run's (`corral tools list`, the cache empty, then filled by it)".into(),
        bins: medians
            .iter()
            .map(|(first, warm)| format!("first {first:.1} MiB, warm {warm:.1} MiB"))
            .collect(),
        peer: "—".into(),
        figures: medians
            .iter()
            .map(|(first, warm)| {
                let ratio = first / warm.max(f64::MIN_POSITIVE);
                (format!("{ratio:.2}×"), ratio)
            })
            .collect(),
        goal_text: "≤ 1.5×".into(),
        goal: Goal::AtMost(1.5),
        skipped: None,
    }
}

/// The trees the search rows run on, each with its name: the unpacked
/// crates (also for `list_files`), and for grep and glob a `node_modules`
/// and the kernel's sources as well.
fn search_trees(search: bool, list: bool, files: usize) -> Vec<(&'static str, TreeResult)> {
    if !search && !list {
        return Vec::new();
    }
    note("the search trees…");
    let mut made = vec![("crates", tree::crates(files))];
    if search {
        made.push(("node_modules", tree::node_modules()));
        made.push(("linux", tree::linux()));
    }
    made.into_iter()
        .map(|(name, made)| {
            let t = made.map_err(|e| e.to_string());
            match &t {
                Ok(t) => note(&format!(
                    "  {name}: {} files, {:.0} MB, from {}, in {}",
                    t.files,
                    t.bytes as f64 / 1e6,
                    t.source,
                    t.path().display()
                )),
                Err(e) => note(&format!("  {name}: no tree: {e}")),
            }
            (name, t)
        })
        .collect()
}

/// The tree of the row `what` when there is one and `rg` runs; else the row
/// skipped, saying why.
fn searchable<'t>(
    what: &str,
    goal: &str,
    tree: &'t TreeResult,
) -> Result<&'t tree::Tree, Box<Row>> {
    note(what);
    let t = match tree {
        Ok(t) => t,
        Err(e) => {
            return Err(Box::new(Row::skipped(
                what,
                goal,
                format!("no search tree: {e}"),
            )));
        }
    };
    if Command::new("rg").arg("--version").output().is_err() {
        let why = "no `rg` in PATH: apt-get install -y ripgrep";
        return Err(Box::new(Row::skipped(what, goal, why.into())));
    }
    Ok(t)
}

/// A search tree, or why there is none.
type TreeResult = Result<tree::Tree, String>;

/// What a search row runs on: the bench's settings, the runtime of its
/// floor, the binaries.
#[derive(Clone, Copy)]
struct On<'a> {
    cfg: &'a Cfg,
    rt: &'a tokio::runtime::Runtime,
    bins: &'a [Bin],
}

/// `corral tool call grep` against `rg -j1 -n` on one tree.
fn grep(on: &On<'_>, name: &str, tree: &TreeResult) -> Row {
    let On { cfg, rt, bins } = *on;
    const WHAT: &str = "`corral tool call grep` vs `rg -j1 -n`, same matches (CPU)";
    const GOAL: &str = "≤ 1.3× CPU";
    let what = format!("{WHAT}, {name}");
    let t = match searchable(&what, GOAL, tree) {
        Ok(t) => t,
        Err(row) => return *row,
    };
    if t.files < 20_000 {
        return Row::skipped(
            &what,
            GOAL,
            format!(
                "the tree has {} files; set CORRAL_BENCH_TREE_FILES to 20000 or more",
                t.files
            ),
        );
    }
    let ws = t.path();
    let pattern = "TODO|FIXME";
    let rg = || {
        let mut c = Command::new("rg");
        c.args(["-j1", "-n", "--", pattern]).current_dir(ws);
        c
    };
    let Ok(rg_out) = Command::new("rg").arg("--version").output() else {
        return Row::skipped(
            &what,
            GOAL,
            "no `rg` in PATH: apt-get install -y ripgrep".into(),
        );
    };
    let rg_version = String::from_utf8_lossy(&rg_out.stdout)
        .lines()
        .next()
        .unwrap_or("")
        .to_owned();
    let args = json!({"pattern": pattern, "max_results": 1_000_000}).to_string();
    // Counted by rg itself (`-c`, lines per file): the lines it prints can
    // be longer than the bench keeps of an output (minified JavaScript).
    let counted = proc::run(
        Command::new("rg")
            .args(["-j1", "-c", "--", pattern])
            .current_dir(ws),
    )
    .out();
    let peer_matches: usize = counted
        .lines()
        .filter_map(|l| {
            l.rsplit_once(':')
                .and_then(|(_, n)| n.parse::<usize>().ok())
        })
        .sum();
    for b in bins {
        let f = proc::run(&mut b.cmd(ws, &["tool", "call", "grep", "--args", &args, "--json"]))
            .ok("grep");
        let v: Value = ok(serde_json::from_slice(&f.stdout));
        let n = v["ok"]["data"]["matches"].as_u64().unwrap_or(0) as usize;
        assert_eq!(
            n, peer_matches,
            "{}: corral grep found {n} matches, {rg_version} {peer_matches}",
            b.label
        );
    }
    note(&format!(
        "  `{pattern}`: {peer_matches} matches in {} files, both agree",
        t.files
    ));
    let k = bins.len() + 1;
    let runs = interleave(cfg.search, k, |i| {
        if i == bins.len() {
            proc::run(&mut rg())
        } else {
            proc::run(&mut bins[i].cmd(ws, &["tool", "call", "grep", "--args", &args])).ok("grep")
        }
    });
    let cpu = |i: usize| median_d(&runs[i].iter().map(|f| f.cpu).collect::<Vec<_>>());
    let cell = |i: usize| {
        cpu_wall(
            &runs[i]
                .iter()
                .map(|f| (f.cpu, f.wall()))
                .collect::<Vec<_>>(),
        )
    };
    let peer = cpu(bins.len());
    let floor = search_floor(cfg, rt, ws, "grep", &args);
    Row {
        what: format!("{what}, {} files, {} matches", t.files, peer_matches),
        bins: (0..bins.len()).map(cell).collect(),
        peer: format!(
            "rg {}; {}",
            cell(bins.len()),
            floor_text("grep", floor, peer)
        ),
        figures: ratios(bins.len(), cpu, peer),
        goal_text: GOAL.into(),
        goal: Goal::AtMost(1.3),
        skipped: None,
    }
}

/// The median CPU of the built-in search plugin's `tool` with `args` over
/// `ws` in plain wasmtime-wasi, in this process: the floor under corral's
/// call of it.
fn search_floor(
    cfg: &Cfg,
    rt: &tokio::runtime::Runtime,
    ws: &Path,
    tool: &str,
    args: &str,
) -> Duration {
    let mut call = floor::plain_builtin_call(rt, "search", ws, tool, args);
    let first = call();
    assert!(!first.is_empty(), "the floor's {tool} found nothing");
    let runs: Vec<Duration> = (0..cfg.search)
        .map(|_| {
            floor::cpu_of(|| {
                call();
            })
        })
        .collect();
    median_d(&runs)
}

/// The floor of a search row, beside its peer's CPU.
fn floor_text(tool: &str, floor: Duration, peer: Duration) -> String {
    format!(
        "the floor: the search plugin's {tool} in plain wasmtime-wasi (in process, its `files` \
         reads served by std::fs, no corral) {} CPU = {:.2}× the peer",
        fmt_d(floor),
        floor.as_secs_f64() / peer.as_secs_f64()
    )
}

/// Each binary's CPU over the peer's, as the figure of a row.
fn ratios(bins: usize, cpu: impl Fn(usize) -> Duration, peer: Duration) -> Vec<(String, f64)> {
    (0..bins)
        .map(|i| {
            let r = cpu(i).as_secs_f64() / peer.as_secs_f64();
            (format!("{r:.2}×"), r)
        })
        .collect()
}

/// The glob each tree is searched with: a name found all over it, a few
/// hundred to a few thousand paths.
fn tree_glob(name: &str) -> &'static str {
    match name {
        "crates" => "lib.rs",
        "node_modules" => "package.json",
        _ => "*.h",
    }
}

/// `corral tool call glob` against `rg -j1 --files -g` and `fd -j1 -g` on
/// one tree; the figure is against the faster of the two.
fn glob(on: &On<'_>, name: &str, tree: &TreeResult) -> Row {
    let On { cfg, rt, bins } = *on;
    const WHAT: &str =
        "`corral tool call glob` vs `rg -j1 --files -g` and `fd -j1 -t f -g`, same paths (CPU)";
    const GOAL: &str = "≤ 1.3× CPU of the faster";
    let what = format!("{WHAT}, {name}");
    let t = match searchable(&what, GOAL, tree) {
        Ok(t) => t,
        Err(row) => return *row,
    };
    let ws = t.path();
    let name_glob = tree_glob(name);
    let rg = || {
        let mut c = Command::new("rg");
        c.args(["-j1", "--files", "-g", name_glob]).current_dir(ws);
        c
    };
    let fd = match fd() {
        Ok(fd) => Some(fd),
        Err(e) => {
            note(&format!("  no fd: {e}"));
            None
        }
    };
    let fd_cmd = |fd: &Path| {
        let mut c = Command::new(fd);
        c.args(["-j1", "-t", "f", "-g", name_glob]).current_dir(ws);
        c
    };
    let args = json!({"pattern": format!("**/{name_glob}"), "limit": 10_000_000}).to_string();
    let want = proc::run(&mut rg()).ok("rg").out().lines().count();
    if let Some(fd) = &fd {
        let n = proc::run(&mut fd_cmd(fd)).ok("fd").out().lines().count();
        assert_eq!(n, want, "fd found {n} paths, rg {want}");
    }
    for b in bins {
        let f = proc::run(&mut b.cmd(ws, &["tool", "call", "glob", "--args", &args, "--json"]))
            .ok("glob");
        let v: Value = ok(serde_json::from_slice(&f.stdout));
        let n = v["ok"]["data"]["paths"].as_array().map_or(0, Vec::len);
        assert_eq!(n, want, "{}: glob found {n} paths, rg {want}", b.label);
    }
    note(&format!(
        "  `**/{name_glob}`: {want} paths in {} files, all agree",
        t.files
    ));
    let peers = 1 + usize::from(fd.is_some());
    let runs = interleave(cfg.search, bins.len() + peers, |i| {
        let r = match i.checked_sub(bins.len()) {
            None => proc::run(&mut bins[i].cmd(ws, &["tool", "call", "glob", "--args", &args]))
                .ok("glob"),
            Some(0) => proc::run(&mut rg()),
            Some(_) => proc::run(&mut fd_cmd(fd.as_deref().unwrap_or(Path::new("fd")))),
        };
        (r.cpu, r.wall())
    });
    let cpu = |i: usize| median_d(&runs[i].iter().map(|r| r.0).collect::<Vec<_>>());
    let peer = (bins.len()..bins.len() + peers)
        .map(cpu)
        .min()
        .unwrap_or_default();
    let mut peer_cells = vec![format!("rg {}", cpu_wall(&runs[bins.len()]))];
    peer_cells.push(match &fd {
        Some(_) => format!("fd {}", cpu_wall(&runs[bins.len() + 1])),
        None => "fd not installed".into(),
    });
    let floor = search_floor(cfg, rt, ws, "glob", &args);
    peer_cells.push(floor_text("glob", floor, peer));
    Row {
        what: format!("{what}, `**/{name_glob}`, {} files, {want} paths", t.files),
        bins: (0..bins.len()).map(|i| cpu_wall(&runs[i])).collect(),
        peer: peer_cells.join("; "),
        figures: ratios(bins.len(), cpu, peer),
        goal_text: GOAL.into(),
        goal: Goal::AtMost(1.3),
        skipped: None,
    }
}

/// fd's binary: `CORRAL_BENCH_FD`, else `fd` in `PATH`, else built by
/// `cargo install` into the bench's cache (once, a minute or two).
fn fd() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("CORRAL_BENCH_FD") {
        return Ok(PathBuf::from(p));
    }
    if Command::new("fd")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        return Ok(PathBuf::from("fd"));
    }
    mcp::cargo_install("fd-find", FD_VERSION, "fd")
}

/// The fd the bench builds when none is installed.
const FD_VERSION: &str = "10.2.0";

/// The manifest of the one plugin `name`, from `source`, reading the
/// workspace.
fn manifest_of(name: &str, source: &str) -> String {
    format!(
        "[plugins.{name}]\nsource = {source:?}\ngrants.fs = [{{ path = \".\", access = \"ro\" }}]\n"
    )
}

/// A small workspace and the plugin `name` from `source` loaded in it.
fn in_small_workspace(
    rt: &tokio::runtime::Runtime,
    runtime: &Runtime,
    name: &str,
    source: &str,
) -> (tempfile::TempDir, Plugins) {
    let ws = common::small_workspace();
    let plugins = load(rt, runtime, ws.path(), &manifest_of(name, source));
    (ws, plugins)
}

/// The time from a call's start (`Plugins::call`) to the plugin's first
/// instruction: the test tool `clock` reads the wall clock as its body's
/// first act and returns it, so the figure also holds the SDK's dispatch
/// and the parsing of `{}` (an upper bound). On an instance made ahead, as
/// a session makes them while the model answers, and on a fresh one.
fn first_instruction(cfg: &Cfg, rt: &tokio::runtime::Runtime, runtime: &Runtime) -> Row {
    const WHAT: &str = "time from a call's start to the plugin's first instruction, in process (`Plugins::call` to the tool's body reading the wall clock: an upper bound), an instance made ahead";
    note(WHAT);
    let (_ws, plugins) = in_small_workspace(rt, runtime, "echo", corral_test_programs::ECHO);
    let plugin = ok(plugins.plugin_for("clock").ok_or("no clock tool")).clone();
    let since_epoch = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    };
    let reach = |ahead: bool| {
        if ahead {
            rt.block_on(async {
                // Asked again while none is ready: a make refused for a
                // moment (no slot free) is not waited for forever.
                while !plugin.ready_ahead() {
                    plugins.make_ahead();
                    tokio::task::yield_now().await;
                }
            });
        }
        let start = since_epoch();
        let out = ok(rt.block_on(plugins.call("clock", "{}", "c")));
        let at: u128 = ok(out.content.parse::<u128>());
        Duration::from_nanos(u64::try_from(at.saturating_sub(start)).unwrap_or(u64::MAX))
    };
    // A first call loads the plugin's code: only then does it make
    // instances ahead (the load let the code go once it was described).
    reach(false);
    for _ in 0..200 {
        reach(true);
        reach(false);
    }
    let (mut ahead, mut fresh) = (Vec::new(), Vec::new());
    for _ in 0..cfg.inproc * 200 {
        ahead.push(reach(true));
        fresh.push(reach(false));
    }
    let (ahead, fresh) = (median_d(&ahead), median_d(&fresh));
    Row {
        what: WHAT.into(),
        bins: vec![fmt_d(ahead)],
        peer: format!(
            "a fresh store and instance made on the call's path {}",
            fmt_d(fresh)
        ),
        figures: vec![(fmt_d(ahead), ahead.as_secs_f64() * 1e6)],
        goal_text: "≤ 10 µs".into(),
        goal: Goal::AtMost(10.0),
        skipped: None,
    }
}

/// The trivial sandboxed call in process, and spawning a process per call
/// against it, interleaved.
fn sandboxed_call(cfg: &Cfg, rt: &tokio::runtime::Runtime, runtime: &Runtime) -> Vec<Row> {
    const WHAT: &str = "trivial sandboxed call overhead, in process (an instance made ahead: arm + call + drop, minus the native call)";
    const RATIO: &str = "process spawn per call ÷ sandboxed call (interleaved)";
    note(WHAT);
    let (ws, plugins) = in_small_workspace(rt, runtime, "example", corral_test_programs::EXAMPLE);
    let example = manifest_of("example", corral_test_programs::EXAMPLE);
    let args = r#"{"path":"small.txt"}"#;
    let check = ok(rt.block_on(plugins.call("word_count", args, "b")));
    assert_eq!(check.content, "5");
    let here = ok(std::env::current_dir());
    ok(std::env::set_current_dir(ws.path()));
    let per = |iters: u32, f: &mut dyn FnMut()| {
        let t = Instant::now();
        for _ in 0..iters {
            f();
        }
        t.elapsed() / iters
    };
    let mut sandboxed = || {
        let out = rt.block_on(plugins.call("word_count", args, "b"));
        assert!(out.is_ok());
    };
    // The same calls on instances made ahead, as a session makes them while
    // it waits for the model: each call's instance is made before the call
    // (not timed), and the call is timed once it is ready.
    let ahead_plugins = load(rt, runtime, ws.path(), &example);
    let example_plugin = ok(ahead_plugins
        .plugin_for("word_count")
        .ok_or("no word_count"))
    .clone();
    let ahead = || {
        rt.block_on(async {
            // Asked again while none is ready: a make refused for a moment
            // (no slot free) is not waited for forever.
            while !example_plugin.ready_ahead() {
                ahead_plugins.make_ahead();
                tokio::task::yield_now().await;
            }
        });
        let t = Instant::now();
        let out = rt.block_on(ahead_plugins.call("word_count", args, "b"));
        let took = t.elapsed();
        assert!(out.is_ok());
        took
    };
    let mut native = || {
        let parsed: corral_plugin_example::Args = ok(serde_json::from_str(args));
        let out = corral_plugin_example::WordCount::run(parsed);
        assert!(out.is_ok_and(|o| o.content == "5"));
    };
    let mut spawn = || {
        let out = Command::new("wc").args(["-w", "small.txt"]).output();
        assert!(out.is_ok_and(|o| o.status.success()));
    };
    let mut bare = floor::bare_instance(rt, corral_test_programs::EXAMPLE);
    let mut plain_call = floor::plain_wasi_call(
        rt,
        corral_test_programs::EXAMPLE,
        ws.path(),
        "word_count",
        args,
    );
    assert_eq!(plain_call(), "5");
    let mut plain = || {
        plain_call();
    };
    per(200, &mut sandboxed);
    per(200, &mut native);
    per(200, &mut bare);
    per(200, &mut plain);
    per(5, &mut spawn);
    let check = ok(rt.block_on(ahead_plugins.call("word_count", args, "b")));
    assert_eq!(check.content, "5");
    for _ in 0..200 {
        ahead();
    }
    // Single calls, alternated, and the median of each: on a loaded machine
    // a preempted call is an outlier of one sample, not of a whole batch.
    let (mut s, mut n, mut f, mut w, mut p, mut a) = (
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
    );
    for _ in 0..cfg.inproc * 20 {
        for _ in 0..10 {
            a.push(ahead());
            s.push(per(1, &mut sandboxed));
            n.push(per(1, &mut native));
            f.push(per(1, &mut bare));
            w.push(per(1, &mut plain));
        }
        p.push(per(1, &mut spawn));
    }
    ok(std::env::set_current_dir(here));
    let (s, n, f, w, p, a) = (
        median_d(&s),
        median_d(&n),
        median_d(&f),
        median_d(&w),
        median_d(&p),
        median_d(&a),
    );
    let overhead = a.saturating_sub(n);
    let ratio = p.as_secs_f64() / a.as_secs_f64();
    vec![
        Row {
            what: WHAT.into(),
            bins: vec![format!("{} per call", fmt_d(a))],
            peer: format!(
                "native fn {}; with a fresh store and instance made on the call's path {} \
                 (overhead {}); the floor of that: the same call in plain wasmtime-wasi (fresh \
                 store, directory preopened, no corral) {} (overhead {}), a bare instance of it \
                 made and dropped, no call, {}",
                fmt_d(n),
                fmt_d(s),
                fmt_d(s.saturating_sub(n)),
                fmt_d(w),
                fmt_d(w.saturating_sub(n)),
                fmt_d(f)
            ),
            figures: vec![(fmt_d(overhead), overhead.as_secs_f64() * 1e6)],
            goal_text: "≤ 10 µs".into(),
            goal: Goal::AtMost(10.0),
            skipped: None,
        },
        Row {
            what: RATIO.into(),
            bins: vec![format!("{} sandboxed", fmt_d(a))],
            peer: format!(
                "spawn `wc -w` {}; the floor: spawn ÷ the same call in plain wasmtime-wasi \
                 (fresh store and instance) {:.0}×",
                fmt_d(p),
                p.as_secs_f64() / w.as_secs_f64()
            ),
            figures: vec![(format!("{ratio:.0}×"), ratio)],
            goal_text: "≥ 100×".into(),
            goal: Goal::AtLeast(100.0),
            skipped: None,
        },
    ]
}

/// From process start to the first token on stdout: `corral run` against
/// curl of the same request to the same mock.
fn first_token(cfg: &Cfg, bins: &[Bin], root: &Path) -> Row {
    const WHAT: &str =
        "time to first token added by corral, from process start, vs curl of the same request";
    const GOAL: &str = "≤ +5 ms";
    note(WHAT);
    let mock = Mock::start(|_, _| Reply::Sse(mock::text(&["Ahoy", " there."])));
    let ws = project(root, "ttft", &openai_manifest(mock.port, ""), bins);
    // Warm: the compile cache, the description cache, the request to copy.
    let mut request = None;
    for b in bins {
        mock.clear();
        proc::run(&mut b.cmd(&ws, &["run", "hello"])).ok("warm-up run");
        request = mock.hits().into_iter().next();
    }
    let Some(request) = request else {
        return Row::skipped(WHAT, GOAL, "corral sent no request to the mock".into());
    };
    let body = root.join("ttft-request.json");
    ok(std::fs::write(&body, &*request.body));
    let url = format!("http://127.0.0.1:{}{}", mock.port, request.path);
    let curl = || curl_replay(&body, &url);
    if Command::new("curl").arg("--version").output().is_err() {
        return Row::skipped(
            WHAT,
            GOAL,
            "no `curl` in PATH: apt-get install -y curl".into(),
        );
    }
    let runs = interleave(cfg.rounds * 2, bins.len() + 1, |i| {
        let mut cmd = if i == bins.len() {
            curl()
        } else {
            bins[i].cmd(&ws, &["run", "hello"])
        };
        let f = proc::run_marked(&mut cmd, b"Ahoy").ok("first token");
        let at = f
            .marker_at
            .unwrap_or_else(|| panic!("no first token on stdout: {}", f.out()));
        (at - f.started, f.cpu)
    });
    let token = |i: usize| median_d(&runs[i].iter().map(|r| r.0).collect::<Vec<_>>());
    let cell = |i: usize| {
        let cpu = median_d(&runs[i].iter().map(|r| r.1).collect::<Vec<_>>());
        format!("{} to the token ({} CPU)", fmt_d(token(i)), fmt_d(cpu))
    };
    let peer = token(bins.len());
    Row {
        what: WHAT.into(),
        bins: (0..bins.len()).map(cell).collect(),
        peer: format!("curl {}", cell(bins.len())),
        figures: (0..bins.len())
            .map(|i| {
                let added = token(i).as_secs_f64() - peer.as_secs_f64();
                (format!("{:+.1} ms", added * 1e3), added * 1e3)
            })
            .collect(),
        goal_text: GOAL.into(),
        goal: Goal::AtMost(5.0),
        skipped: None,
    }
}

/// Tool results in an OpenAI request body.
fn tool_results(body: &[u8]) -> usize {
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| {
            v["messages"]
                .as_array()
                .map(|m| m.iter().filter(|m| m["role"] == "tool").count())
        })
        .unwrap_or(0)
}

/// From the end of one streamed response to the arrival of the next
/// request, at the mock, in a session of `read_file` calls.
fn loop_overhead(cfg: &Cfg, bins: &[Bin], root: &Path) -> Row {
    const WHAT: &str = "loop host overhead per iteration (response end → next request, at the mock; one `read_file` call each)";
    const STEPS: usize = 20;
    note(WHAT);
    let mock = Mock::start(|_, body| {
        let n = tool_results(body);
        if n < STEPS {
            Reply::Sse(mock::tool_call(
                &format!("call_{n}"),
                "read_file",
                &json!({"path": "small.txt"}),
            ))
        } else {
            Reply::Sse(mock::text(&["Done."]))
        }
    });
    let ws = project(root, "loop", &openai_manifest(mock.port, ""), bins);
    ok(std::fs::write(
        ws.join("small.txt"),
        "one two three four five\n",
    ));
    let session = |b: &Bin| {
        mock.clear();
        let f = proc::run(&mut b.cmd(&ws, &["run", "go"])).ok("loop run");
        let hits = mock.hits();
        assert_eq!(
            hits.len(),
            STEPS + 1,
            "{}: requests of the session",
            b.label
        );
        let gaps: Vec<Duration> = hits
            .windows(2)
            .map(|w| w[1].received.saturating_duration_since(w[0].answered))
            .collect();
        (median_d(&gaps), (f.cpu, f.wall()))
    };
    for b in bins {
        session(b);
    }
    let runs = interleave(cfg.rounds, bins.len(), |i| session(&bins[i]));
    Row {
        what: WHAT.into(),
        bins: runs
            .iter()
            .map(|r| {
                let s: Vec<_> = r.iter().map(|x| x.1).collect();
                format!("session of {STEPS} calls: {}", cpu_wall(&s))
            })
            .collect(),
        peer: "—".into(),
        figures: runs
            .iter()
            .map(|r| {
                let m = median_d(&r.iter().map(|x| x.0).collect::<Vec<_>>());
                (fmt_d(m), m.as_secs_f64() * 1e3)
            })
            .collect(),
        goal_text: "≤ 1 ms".into(),
        goal: Goal::AtMost(1.0),
        skipped: None,
    }
}

fn jsonl_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "jsonl") {
                out.push(p);
            }
        }
    }
    out
}

/// Replaces every string equal to a key of `ids` in `v`.
fn rename(v: &mut Value, ids: &[(String, String)]) {
    match v {
        Value::String(s) => {
            if let Some((_, to)) = ids.iter().find(|(from, _)| from == s) {
                *s = to.clone();
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| rename(x, ids)),
        Value::Object(o) => o.values_mut().for_each(|x| rename(x, ids)),
        _ => {}
    }
}

/// Grows the one session in `dir` (a prompt, one `read_file` call, an
/// answer) to `events` events by repeating its tool-calling iteration, as
/// the binary itself wrote it; the log ends after a tool result, so resuming
/// asks the model again.
fn grow_session(dir: &Path, events: usize) -> Result<(PathBuf, usize), String> {
    let logs = jsonl_files(dir);
    let [log] = logs.as_slice() else {
        return Err(format!("expected one session log, found {}", logs.len()));
    };
    let text = std::fs::read_to_string(log).map_err(|e| e.to_string())?;
    let lines: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let kind = |v: &Value| v["event"]["type"].as_str().unwrap_or("").to_owned();
    let begin = lines
        .iter()
        .position(|l| kind(l) == "request_begin")
        .ok_or("no request_begin in the seed session")?;
    let end = lines
        .iter()
        .position(|l| kind(l) == "tool_call_end")
        .ok_or("no tool_call_end in the seed session")?;
    let id = lines[end]["event"]["call_id"]
        .as_str()
        .ok_or("a tool_call_end without call_id")?
        .to_owned();
    let model_id = lines[begin..end]
        .iter()
        .find_map(|l| l["event"]["call"]["model_id"].as_str().map(str::to_owned));
    let mut out = String::new();
    let mut seq = 0u64;
    let push = |mut v: Value, out: &mut String, seq: &mut u64| {
        *seq += 1;
        v["seq"] = json!(*seq);
        out.push_str(&v.to_string());
        out.push('\n');
    };
    for l in &lines[..begin] {
        push(l.clone(), &mut out, &mut seq);
    }
    let block = &lines[begin..=end];
    let mut i = 0;
    while (seq as usize) < events {
        let mut ids = vec![(id.clone(), format!("{id}r{i}"))];
        if let Some(m) = &model_id {
            ids.push((m.clone(), format!("{m}r{i}")));
        }
        for l in block {
            let mut v = l.clone();
            rename(&mut v, &ids);
            push(v, &mut out, &mut seq);
        }
        i += 1;
    }
    std::fs::write(log, out).map_err(|e| e.to_string())?;
    Ok((log.clone(), seq as usize))
}

/// `corral resume` of a 100k-event session until its request reaches the
/// mock.
fn resume(cfg: &Cfg, bins: &[Bin], root: &Path) -> Row {
    const WHAT: &str =
        "resume of a 100k-event session, whole process until the request reaches the mock";
    const GOAL: &str = "≤ 300 ms";
    note(WHAT);
    let mock = Mock::start(|_, body| {
        // The seed session's first request calls a tool; everything else,
        // the resumed requests included, is answered at once.
        if body.len() < 1 << 20 && tool_results(body) == 0 {
            Reply::Sse(mock::tool_call(
                "call_1",
                "read_file",
                &json!({"path": "notes.txt"}),
            ))
        } else {
            Reply::Sse(mock::text(&["Done."]))
        }
    });
    let ws = project(root, "resume", &openai_manifest(mock.port, ""), bins);
    // Results of about 900 bytes make a 100k-event request of ~17 MB.
    let notes: String = (1..=12)
        .map(|i| format!("line {i:02}: the parser reads tokens one at a time and keeps going\n"))
        .collect();
    ok(std::fs::write(ws.join("notes.txt"), notes));
    let mut seeds = Vec::new();
    for b in bins {
        let dir = b.sessions();
        let _ = std::fs::remove_dir_all(&dir);
        proc::run(&mut b.cmd(&ws, &["run", "read notes.txt"])).ok("seed session");
        match grow_session(&dir, 100_000) {
            Ok((log, n)) => {
                let pristine = b.home.join("resume.pristine.jsonl");
                ok(std::fs::copy(&log, &pristine));
                let size = std::fs::metadata(&log).map_or(0, |m| m.len());
                note(&format!(
                    "  {}: {n} events, {:.1} MB log",
                    b.label,
                    size as f64 / 1e6
                ));
                seeds.push((log, pristine, n));
            }
            Err(e) => return Row::skipped(WHAT, GOAL, format!("{}: {e}", b.label)),
        }
    }
    let mut sizes = vec![0usize; bins.len()];
    let once = |i: usize, sizes: &mut Vec<usize>| {
        let (log, pristine, _) = &seeds[i];
        ok(std::fs::copy(pristine, log));
        mock.clear();
        let r = proc::start(&mut bins[i].cmd(&ws, &["resume", "--last"]), None, false);
        let at = mock.wait_arrival(1, Duration::from_secs(170));
        let f = r.finish().ok("resume");
        sizes[i] = mock.hits().first().map_or(0, |h| h.body.len());
        let at = at.unwrap_or_else(|| panic!("resume sent no request: {}", f.out()));
        (at - f.started, f.cpu)
    };
    for i in 0..bins.len() {
        once(i, &mut sizes);
    }
    let runs = interleave(cfg.heavy, bins.len(), |i| once(i, &mut sizes));
    Row {
        what: format!("{WHAT} ({} events)", seeds[0].2),
        bins: (0..bins.len())
            .map(|i| {
                let cpu = median_d(&runs[i].iter().map(|r| r.1).collect::<Vec<_>>());
                format!(
                    "{} CPU, {:.1} MB request",
                    fmt_d(cpu),
                    sizes[i] as f64 / 1e6
                )
            })
            .collect(),
        peer: "—".into(),
        figures: runs
            .iter()
            .map(|r| {
                let w = median_d(&r.iter().map(|x| x.0).collect::<Vec<_>>());
                (fmt_d(w), w.as_secs_f64() * 1e3)
            })
            .collect(),
        goal_text: GOAL.into(),
        goal: Goal::AtMost(300.0),
        skipped: None,
    }
}

/// A 24 MB streamed answer through the openai plugin, whole process, against
/// curl reading the same stream.
fn sse(cfg: &Cfg, bins: &[Bin], root: &Path) -> Row {
    const WHAT: &str = "SSE through the openai plugin, whole process (request arrival → exit), vs curl from the same mock";
    const GOAL: &str = "≥ 200 MB/s";
    note(WHAT);
    let body = mock::big(24 << 20);
    let bytes = body.len();
    let mock = {
        let body = body.clone();
        Mock::start(move |_, _| Reply::Sse(body.clone()))
    };
    // A 24 MB answer needs more than the default memory and time limits.
    let ws = project(
        root,
        "sse",
        &openai_manifest(
            mock.port,
            "limits = { timeout_ms = 300000, memory_mb = 1024 }",
        ),
        bins,
    );
    let clean = |b: &Bin| {
        // Each run logs the 24 MB answer: drop this project's sessions.
        if let Ok(entries) = std::fs::read_dir(b.sessions()) {
            for e in entries.flatten() {
                if e.file_name().to_string_lossy().starts_with("sse-") {
                    let _ = std::fs::remove_dir_all(e.path());
                }
            }
        }
    };
    let mut request = None;
    for b in bins {
        mock.clear();
        let f = proc::run(&mut b.cmd(&ws, &["run", "go"])).ok("warm-up run");
        assert!(
            f.stdout_len > 20 << 20,
            "{}: {} bytes printed",
            b.label,
            f.stdout_len
        );
        request = mock.hits().into_iter().next();
        clean(b);
    }
    let Some(request) = request else {
        return Row::skipped(WHAT, GOAL, "corral sent no request to the mock".into());
    };
    if Command::new("curl").arg("--version").output().is_err() {
        return Row::skipped(
            WHAT,
            GOAL,
            "no `curl` in PATH: apt-get install -y curl".into(),
        );
    }
    let file = root.join("sse-request.json");
    ok(std::fs::write(&file, &*request.body));
    let url = format!("http://127.0.0.1:{}{}", mock.port, request.path);
    let runs = interleave(cfg.rounds, bins.len() + 1, |i| {
        mock.clear();
        let f = if i == bins.len() {
            proc::run(&mut curl_replay(&file, &url)).ok("curl")
        } else {
            let f = proc::run(&mut bins[i].cmd(&ws, &["run", "go"])).ok("sse run");
            clean(&bins[i]);
            f
        };
        let hit = mock
            .hits()
            .into_iter()
            .next()
            .unwrap_or_else(|| panic!("no request reached the mock"));
        let took = f.exited.saturating_duration_since(hit.received);
        (bytes as f64 / 1e6 / took.as_secs_f64(), f.cpu)
    });
    let rate = |i: usize| median_f(&runs[i].iter().map(|r| r.0).collect::<Vec<_>>());
    let cpu = |i: usize| fmt_d(median_d(&runs[i].iter().map(|r| r.1).collect::<Vec<_>>()));
    let peer = rate(bins.len());
    Row {
        what: format!("{WHAT}, {:.0} MB", bytes as f64 / 1e6),
        bins: (0..bins.len())
            .map(|i| format!("{:.0} MB/s, {} CPU", rate(i), cpu(i)))
            .collect(),
        peer: format!("curl {peer:.0} MB/s, {} CPU", cpu(bins.len())),
        figures: (0..bins.len())
            .map(|i| {
                let v = rate(i);
                (format!("{v:.0} MB/s"), v)
            })
            .collect(),
        goal_text: GOAL.into(),
        goal: Goal::AtLeast(200.0),
        skipped: None,
    }
}

/// The componentize-py executable, or why there is none.
fn componentize_py() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("CORRAL_COMPONENTIZE_PY") {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!(
                "CORRAL_COMPONENTIZE_PY={} is not a file",
                p.display()
            ))
        };
    }
    let base = std::env::var_os("CORRAL_CI_CACHE")
        .map(PathBuf::from)
        .or_else(|| dirs::home_dir().map(|h| h.join(".cache/corral-ci")))
        .ok_or("neither CORRAL_CI_CACHE nor HOME is set")?;
    let p = base.join("plugin-py/bin/componentize-py");
    if p.is_file() {
        Ok(p)
    } else {
        Err(format!(
            "no componentize-py at {} and CORRAL_COMPONENTIZE_PY is not set \
             (python3 -m venv {} && {0}/../pip install componentize-py==0.25.1)",
            p.display(),
            base.join("plugin-py").display()
        ))
    }
}

/// Builds the Python tool plugin of `benches/python-tool` into `out`.
fn build_python(componentize: &Path, out: &Path) -> Result<(), String> {
    let src = tempfile::tempdir().map_err(|e| e.to_string())?;
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::copy(
        here.join("benches/python-tool/app.py"),
        src.path().join("app.py"),
    )
    .map_err(|e| e.to_string())?;
    let o = Command::new(componentize)
        .arg("-d")
        .arg(here.join("../wit"))
        .args(["-w", "tool-plugin", "componentize", "app", "-o"])
        .arg(out)
        .current_dir(src.path())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", componentize.display()))?;
    if o.status.success() {
        Ok(())
    } else {
        Err(format!(
            "componentize-py failed: {}",
            String::from_utf8_lossy(&o.stderr)
        ))
    }
}

/// A warm call of the Python plugin against the Rust example plugin, each
/// alone in its project, and the Rust call in a project that also declares
/// the Python plugin.
fn python(cfg: &Cfg, bins: &[Bin], root: &Path) -> Vec<Row> {
    const WHAT: &str = "warm `corral tool call` of the ~18 MB Python plugin vs the Rust example plugin, each alone in its project (CPU)";
    const UNUSED: &str = "the Rust call with the Python plugin declared but unused vs alone (CPU)";
    const GOAL: &str = "≤ 2× CPU";
    const GOAL_UNUSED: &str = "costs nothing (≤ 1.05×)";
    note(WHAT);
    let wasm = root.join("python.wasm");
    let built = componentize_py().and_then(|c| {
        let t = Instant::now();
        build_python(&c, &wasm)?;
        note(&format!(
            "  built the Python plugin in {:.1} s: {:.1} MB",
            t.elapsed().as_secs_f64(),
            std::fs::metadata(&wasm).map_or(0, |m| m.len()) as f64 / 1e6
        ));
        Ok(())
    });
    if let Err(why) = built {
        return vec![
            Row::skipped(WHAT, GOAL, why.clone()),
            Row::skipped(UNUSED, GOAL_UNUSED, why),
        ];
    }
    let rust = format!(
        "[plugins.example]\nsource = {:?}\ngrants.fs = [{{ path = \".\", access = \"ro\" }}]\n",
        corral_test_programs::EXAMPLE
    );
    let py = format!(
        "[plugins.python]\nsource = {:?}\ngrants.fs = [{{ path = \".\", access = \"ro\" }}]\n",
        wasm.display().to_string()
    );
    let cases = [
        (project(root, "rust-alone", &rust, bins), "word_count"),
        (project(root, "python-alone", &py, bins), "py_word_count"),
        (
            project(root, "rust-beside-python", &format!("{rust}\n{py}"), bins),
            "word_count",
        ),
    ];
    for (ws, _) in &cases {
        ok(std::fs::write(
            ws.join("small.txt"),
            "one two three four five\n",
        ));
    }
    let call = |b: &Bin, c: usize| {
        let (ws, tool) = &cases[c];
        let f = proc::run(&mut b.cmd(
            ws,
            &["tool", "call", tool, "--args", r#"{"path":"small.txt"}"#],
        ))
        .ok(tool);
        assert_eq!(f.out().trim(), "5", "{}: {tool}", b.label);
        (f.cpu, f.wall())
    };
    for b in bins {
        for c in 0..cases.len() {
            call(b, c);
        }
    }
    let k = cases.len();
    let runs = interleave(cfg.rounds, bins.len() * k, |i| call(&bins[i / k], i % k));
    let cpu =
        |b: usize, c: usize| median_d(&runs[b * k + c].iter().map(|r| r.0).collect::<Vec<_>>());
    let cell = |b: usize, c: usize| cpu_wall(&runs[b * k + c]);
    let ratio = |b: usize, c: usize| cpu(b, c).as_secs_f64() / cpu(b, 0).as_secs_f64();
    vec![
        Row {
            what: WHAT.into(),
            bins: (0..bins.len())
                .map(|b| format!("Python {}", cell(b, 1)))
                .collect(),
            peer: format!("Rust {}", cell(0, 0)),
            figures: (0..bins.len())
                .map(|b| (format!("{:.2}×", ratio(b, 1)), ratio(b, 1)))
                .collect(),
            goal_text: GOAL.into(),
            goal: Goal::AtMost(2.0),
            skipped: None,
        },
        Row {
            what: UNUSED.into(),
            bins: (0..bins.len()).map(|b| cell(b, 2)).collect(),
            peer: format!("alone {}", cell(0, 0)),
            figures: (0..bins.len())
                .map(|b| (format!("{:.2}×", ratio(b, 2)), ratio(b, 2)))
                .collect(),
            goal_text: GOAL_UNUSED.into(),
            goal: Goal::AtMost(1.05),
            skipped: None,
        },
    ]
}

/// `corral tool call list_files` at depth 3 against `find -maxdepth 3`,
/// hidden and ignored entries included on both sides.
fn list_files(cfg: &Cfg, rt: &tokio::runtime::Runtime, bins: &[Bin], tree: &TreeResult) -> Row {
    const WHAT: &str = "`list_files` depth 3 vs `find -maxdepth 3`, same entries (CPU)";
    const GOAL: &str = "≤ 2× CPU";
    note(WHAT);
    let t = match tree {
        Ok(t) => t,
        Err(e) => return Row::skipped(WHAT, GOAL, format!("no tree: {e}")),
    };
    let ws = t.path();
    let find = || {
        let mut c = Command::new("find");
        c.args([".", "-mindepth", "1", "-maxdepth", "3"])
            .current_dir(ws);
        c
    };
    let args = json!({"depth": 3, "limit": 10_000_000, "all": true}).to_string();
    let peer_entries = proc::run(&mut find()).ok("find").out().lines().count();
    for b in bins {
        let f = proc::run(&mut b.cmd(
            ws,
            &["tool", "call", "list_files", "--args", &args, "--json"],
        ))
        .ok("list_files");
        let v: Value = ok(serde_json::from_slice(&f.stdout));
        let n = v["ok"]["data"]["entries"].as_array().map_or(0, Vec::len);
        assert_eq!(
            n, peer_entries,
            "{}: list_files gave {n} entries, find {peer_entries}",
            b.label
        );
    }
    let runs = interleave(cfg.rounds, bins.len() + 1, |i| {
        let f = if i == bins.len() {
            proc::run(&mut find())
        } else {
            proc::run(&mut bins[i].cmd(ws, &["tool", "call", "list_files", "--args", &args]))
                .ok("list_files")
        };
        (f.cpu, f.wall())
    });
    let cpu = |i: usize| median_d(&runs[i].iter().map(|r| r.0).collect::<Vec<_>>());
    let peer = cpu(bins.len());
    // The floor: the fs plugin's own walk, in plain wasmtime-wasi.
    let mut call = floor::plain_builtin_call(rt, "fs", ws, "list_files", &args);
    assert_eq!(
        call().lines().count(),
        peer_entries,
        "the floor's list_files"
    );
    let floor = median_d(
        &(0..cfg.rounds)
            .map(|_| {
                floor::cpu_of(|| {
                    call();
                })
            })
            .collect::<Vec<_>>(),
    );
    Row {
        what: format!("{WHAT}, {peer_entries} entries"),
        bins: (0..bins.len()).map(|i| cpu_wall(&runs[i])).collect(),
        peer: format!(
            "find {}; the floor: the fs plugin's list_files in plain wasmtime-wasi (in process, \
             no process start, no corral) {} CPU = {:.2}× the peer",
            cpu_wall(&runs[bins.len()]),
            fmt_d(floor),
            floor.as_secs_f64() / peer.as_secs_f64()
        ),
        figures: (0..bins.len())
            .map(|i| {
                let r = cpu(i).as_secs_f64() / peer.as_secs_f64();
                (format!("{r:.1}×"), r)
            })
            .collect(),
        goal_text: GOAL.into(),
        goal: Goal::AtMost(2.0),
        skipped: None,
    }
}

/// A trivial `before_tool` hook's cost per call against the cheapest call it
/// guards (`read_file` of a 24-byte file), through the dispatcher's whole
/// path, in interleaved rounds.
fn hook(cfg: &Cfg, rt: &tokio::runtime::Runtime, runtime: &Runtime) -> Row {
    const WHAT: &str = "a trivial `before_tool` hook vs the cheapest call it guards (`read_file`, in process; instances made ahead, as a session makes them while it waits for the model)";
    note(WHAT);
    let ws = common::small_workspace();
    let extra = format!(
        "[plugins.trivial]\nsource = {:?}\nconfig = {{ mode = \"continue\" }}\n\n\
         [hooks]\nbefore_tool = [{{ plugin = \"trivial\" }}]\n",
        corral_test_programs::HOOK
    );
    let manifest = common::manifest(ws.path(), &extra);
    let plugins = Arc::new(load(rt, runtime, ws.path(), &extra));
    let hooks = Arc::new(ok(rt.block_on(Hooks::new(&manifest.hooks, &plugins))));
    let (plain, hooked) = common::plain_and_hooked(plugins.clone(), hooks);
    let call = common::read_small();
    let cancel = tokio_util::sync::CancellationToken::new();
    let run = |d: &Dispatcher| {
        let outcome = ok(rt.block_on(d.run_one(&call, &mut common::Discard, &cancel)));
        assert!(!outcome.is_error, "{}", outcome.content);
    };
    let fresh = |d: &Dispatcher| {
        let t = Instant::now();
        run(d);
        t.elapsed()
    };
    // Every loaded plugin (the tool's and the hook's) makes its next
    // instance, untimed; the call is timed once they are ready.
    let loaded: Vec<_> = [
        plugins.plugin_for(&call.name),
        plugins
            .plugins()
            .iter()
            .find(|p| p.decl().name == "trivial"),
    ]
    .into_iter()
    .flatten()
    .cloned()
    .collect();
    assert_eq!(
        loaded.len(),
        2,
        "the tool's and the hook's plugins are loaded"
    );
    let ahead = |d: &Dispatcher| {
        rt.block_on(async {
            while !loaded.iter().all(|p| p.ready_ahead()) {
                plugins.make_ahead();
                tokio::task::yield_now().await;
            }
        });
        fresh(d)
    };
    let mut bare_hook = floor::plain_wasi_hook(rt, corral_test_programs::HOOK);
    let mut floor_hook = || {
        let t = Instant::now();
        bare_hook();
        t.elapsed()
    };
    for _ in 0..20 {
        run(&plain);
        run(&hooked);
        floor_hook();
    }
    // Single calls, alternated, and the median of each (see sandboxed_call).
    let (mut a, mut b, mut fa, mut fb, mut f) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..cfg.inproc * 200 {
        a.push(ahead(&plain));
        b.push(ahead(&hooked));
        fa.push(fresh(&plain));
        fb.push(fresh(&hooked));
        f.push(floor_hook());
    }
    let (a, b, fa, fb, f) = (
        median_d(&a),
        median_d(&b),
        median_d(&fa),
        median_d(&fb),
        median_d(&f),
    );
    let ratio = b.saturating_sub(a).as_secs_f64() / a.as_secs_f64();
    Row {
        what: WHAT.into(),
        bins: vec![format!("hook {}", fmt_d(b.saturating_sub(a)))],
        peer: format!(
            "call {}; instances made on the call's path: hook {}, call {}; the floor of that: \
             the same hook in plain wasmtime-wasi (fresh store and instance, no corral) {} = \
             {:.2} of the call",
            fmt_d(a),
            fmt_d(fb.saturating_sub(fa)),
            fmt_d(fa),
            fmt_d(f),
            f.as_secs_f64() / fa.as_secs_f64()
        ),
        figures: vec![(format!("{ratio:.2}"), ratio)],
        goal_text: "≤ 0.3".into(),
        goal: Goal::AtMost(0.3),
        skipped: None,
    }
}

/// curl sending the request body in `body` (what corral sent) to `url` on
/// the mock, with the same headers, streaming the answer.
fn curl_replay(body: &Path, url: &str) -> Command {
    let mut c = Command::new("curl");
    c.args([
        "-sS",
        "-N",
        "-X",
        "POST",
        "-H",
        "content-type: application/json",
    ])
    .arg("-H")
    .arg(format!("authorization: Bearer {KEY}"))
    .arg("--data-binary")
    .arg(format!("@{}", body.display()))
    .arg(url);
    c
}
