//! The MCP rows: `corral mcp serve` beside the MCP filesystem servers users
//! would pick instead, the reference server from npm
//! (`@modelcontextprotocol/server-filesystem`) and `rust-mcp-filesystem`
//! from crates.io, each a child on stdio driven by the same JSON-RPC client
//! here, in interleaved rounds.
//!
//! The peers come from `CORRAL_BENCH_MCP_REFERENCE` (the server's
//! `dist/index.js`) and `CORRAL_BENCH_MCP_RUST` (the binary), or else from
//! the bench's own cache (`~/.cache/corral-bench`), which the first run
//! fills with `npm install` and `cargo install` (a few minutes, once).

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// The reference server's version, as `.ci/run` pins it.
const REFERENCE_VERSION: &str = "2026.8.31";
/// rust-mcp-filesystem's version.
const RUST_VERSION: &str = "0.4.5";

/// One MCP server on stdio.
pub(crate) struct Server {
    /// Who it is, for the table.
    pub(crate) label: String,
    child: Child,
    stdin: ChildStdin,
    out: BufReader<ChildStdout>,
    next: u64,
    /// The name of its tool that reads a text file.
    pub(crate) read_tool: String,
}

impl Server {
    /// Starts `cmd` and initializes it; `read_tool` is its read tool.
    pub(crate) fn start(label: &str, mut cmd: Command, read_tool: &str) -> Result<Self, String> {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("{label}: cannot start: {e}"))?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let out = BufReader::new(child.stdout.take().ok_or("no stdout")?);
        let mut server = Self {
            label: label.to_owned(),
            child,
            stdin,
            out,
            next: 1,
            read_tool: read_tool.to_owned(),
        };
        server.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "corral-bench", "version": "1"}}),
        )?;
        server.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
        Ok(server)
    }

    fn send(&mut self, message: &Value) -> Result<(), String> {
        let mut line = message.to_string();
        line.push('\n');
        self.stdin
            .write_all(line.as_bytes())
            .and_then(|()| self.stdin.flush())
            .map_err(|e| format!("{}: cannot write: {e}", self.label))
    }

    /// Writes requests for each of `params`, then reads every answer: the
    /// answers (by request order) and the bytes they took on the wire.
    pub(crate) fn pipelined(
        &mut self,
        method: &str,
        params: &[Value],
    ) -> Result<(Vec<Value>, usize), String> {
        let first = self.next;
        for p in params {
            let id = self.next;
            self.next += 1;
            self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": p}))?;
        }
        let mut answers = vec![Value::Null; params.len()];
        let (mut got, mut bytes) = (0, 0);
        let mut line = String::new();
        while got < params.len() {
            line.clear();
            let n = self
                .out
                .read_line(&mut line)
                .map_err(|e| format!("{}: cannot read: {e}", self.label))?;
            if n == 0 {
                return Err(format!("{}: closed its output", self.label));
            }
            let v: Value = serde_json::from_str(&line)
                .map_err(|e| format!("{}: not JSON ({e}): {line}", self.label))?;
            let Some(id) = v["id"].as_u64().filter(|id| *id >= first) else {
                continue; // a notification, or an answer to nothing asked here
            };
            let slot = (id - first) as usize;
            if slot < answers.len() && answers[slot].is_null() {
                bytes += n;
                got += 1;
                answers[slot] = v;
            }
        }
        for a in &answers {
            if a.get("error").is_some() || a["result"]["isError"] == true {
                return Err(format!("{}: {a}", self.label));
            }
        }
        Ok((answers, bytes))
    }

    /// One request: its answer and its bytes on the wire.
    pub(crate) fn request(
        &mut self,
        method: &str,
        params: Value,
    ) -> Result<(Value, usize), String> {
        let (mut answers, bytes) = self.pipelined(method, &[params])?;
        Ok((answers.remove(0), bytes))
    }

    /// Calls `tool` with `args` `n` times at once, timed until the last
    /// answer; the bytes of one answer.
    pub(crate) fn calls(
        &mut self,
        tool: &str,
        args: &Value,
        n: usize,
    ) -> Result<(Duration, usize), String> {
        let params = vec![json!({"name": tool, "arguments": args}); n];
        let t = Instant::now();
        let (_, bytes) = self.pipelined("tools/call", &params)?;
        Ok((t.elapsed(), bytes / n))
    }

    /// The text of a `tools/call` answer's content.
    pub(crate) fn text(answer: &Value) -> String {
        answer["result"]["content"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The bench's own cache of peers.
pub(crate) fn cache() -> PathBuf {
    std::env::var_os("HOME")
        .map_or_else(std::env::temp_dir, PathBuf::from)
        .join(".cache/corral-bench")
}

/// The reference filesystem server's `dist/index.js`, installed from npm
/// into the bench's cache when neither the variable nor `.ci/run`'s copy
/// has it.
pub(crate) fn reference() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("CORRAL_BENCH_MCP_REFERENCE") {
        return Ok(PathBuf::from(p));
    }
    let tail = "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js";
    let ci = std::env::var_os("CORRAL_TEST_MCP_SERVERS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            std::env::var_os("HOME")
                .map_or_else(std::env::temp_dir, PathBuf::from)
                .join(".cache/corral-ci/mcp-servers")
        });
    let here = ci.join("npm").join(tail);
    if here.is_file() {
        return Ok(here);
    }
    let dir = cache().join("npm");
    let script = dir.join(tail);
    if !script.is_file() {
        super::note(&format!(
            "  installing @modelcontextprotocol/server-filesystem@{REFERENCE_VERSION} into {} (once)",
            dir.display()
        ));
        let pkg = format!("@modelcontextprotocol/server-filesystem@{REFERENCE_VERSION}");
        npm_install(&dir, &[], &[pkg.as_str()])?;
        if !script.is_file() {
            return Err(format!("npm install left no {}", script.display()));
        }
    }
    Ok(script)
}

/// rust-mcp-filesystem's binary, built by `cargo install` into the bench's
/// cache when the variable does not name one.
pub(crate) fn rust() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("CORRAL_BENCH_MCP_RUST") {
        return Ok(PathBuf::from(p));
    }
    cargo_install("rust-mcp-filesystem", RUST_VERSION, "rust-mcp-filesystem")
}

/// `npm install` of `packages` into `dir` (with `extra` flags), quietly.
pub(crate) fn npm_install(dir: &Path, extra: &[&str], packages: &[&str]) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let status = Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--loglevel=error"])
        .args(extra)
        .arg("--prefix")
        .arg(dir)
        .args(packages)
        .status()
        .map_err(|e| format!("no npm ({e}): apt-get install -y npm"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("npm install failed ({status})"))
    }
}

/// The binary `bin` of crate `krate` at `version`, built by `cargo install`
/// into the bench's cache the first time (minutes, once).
pub(crate) fn cargo_install(krate: &str, version: &str, bin: &str) -> Result<PathBuf, String> {
    let root = cache().join(krate);
    let exe = root.join("bin").join(bin);
    if !exe.is_file() {
        super::note(&format!(
            "  building {krate} {version} into {} (once, minutes)",
            root.display()
        ));
        let status = Command::new("cargo")
            .args([
                "install",
                "--locked",
                "--quiet",
                krate,
                "--version",
                version,
            ])
            .arg("--root")
            .arg(&root)
            .env("CARGO_TARGET_DIR", root.join("target"))
            .env_remove("RUSTC_WORKSPACE_WRAPPER")
            .status()
            .map_err(|e| format!("no cargo ({e})"))?;
        let _ = std::fs::remove_dir_all(root.join("target"));
        if !status.success() || !exe.is_file() {
            return Err(format!("cargo install {krate} failed ({status})"));
        }
    }
    Ok(exe)
}

/// The command of the reference server over `root`.
pub(crate) fn reference_cmd(script: &Path, root: &Path) -> Command {
    let mut c = Command::new("node");
    c.arg(script).arg(root).current_dir(root);
    c
}

/// The command of rust-mcp-filesystem over `root`.
pub(crate) fn rust_cmd(bin: &Path, root: &Path) -> Command {
    let mut c = Command::new(bin);
    c.arg(root).current_dir(root);
    c
}

/// The servers of the MCP rows, corral's first (one per binary), then the
/// peers; or why a peer is missing.
struct Field {
    servers: Vec<Server>,
    corral: usize,
    ws: tempfile::TempDir,
}

/// A 1,957-byte text file, as a small source file is.
fn small_file() -> String {
    let mut text = String::new();
    let mut n = 0;
    while text.len() < 1900 {
        text.push_str(&format!("line {n}: some words of a small source file\n"));
        n += 1;
    }
    text.truncate(1956);
    text.push('\n');
    text
}

/// The project's tracked files copied into `dir` (a real tree of sources
/// for the glob row).
fn copy_sources(dir: &Path) -> Result<usize, String> {
    let top = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = Command::new("git")
        .arg("-C")
        .arg(&top)
        .args(["ls-files", "-z"])
        .output()
        .map_err(|e| format!("no git: {e}"))?;
    let mut n = 0;
    for name in out.stdout.split(|b| *b == 0).filter(|s| !s.is_empty()) {
        let rel = Path::new(std::str::from_utf8(name).map_err(|e| e.to_string())?);
        let from = top.join(rel);
        if !from.is_file() {
            continue;
        }
        let to = dir.join(rel);
        std::fs::create_dir_all(to.parent().unwrap_or(dir)).map_err(|e| e.to_string())?;
        std::fs::copy(&from, &to).map_err(|e| e.to_string())?;
        n += 1;
    }
    Ok(n)
}

fn field(bins: &[super::Bin]) -> Result<Field, String> {
    let ws = tempfile::Builder::new()
        .prefix("corral-bench-mcp-")
        .tempdir()
        .map_err(|e| e.to_string())?;
    let root = ws.path().canonicalize().map_err(|e| e.to_string())?;
    std::fs::write(root.join("notes.txt"), small_file()).map_err(|e| e.to_string())?;
    let files = copy_sources(&root.join("tree"))?;
    super::note(&format!(
        "  a workspace with notes.txt and {files} source files"
    ));
    let reference = reference()?;
    let rust = rust()?;
    let mut servers = Vec::new();
    for b in bins {
        servers.push(Server::start(
            &format!("corral ({})", b.label),
            b.cmd(&root, &["mcp", "serve"]),
            "read_file",
        )?);
    }
    let corral = servers.len();
    servers.push(Server::start(
        "reference server",
        reference_cmd(&reference, &root),
        "read_text_file",
    )?);
    servers.push(Server::start(
        "rust-mcp-filesystem",
        rust_cmd(&rust, &root),
        "read_text_file",
    )?);
    Ok(Field {
        servers,
        corral,
        ws,
    })
}

/// The args of `server`'s read of `notes.txt`.
fn read_args(server: &Server, root: &Path) -> Value {
    if server.read_tool == "read_file" {
        json!({"path": "notes.txt"})
    } else {
        json!({"path": root.join("notes.txt")})
    }
}

/// The call that globs `**/*.rs` under `tree/`, as each server takes it.
fn glob_call(i: usize, corral: usize, root: &Path) -> (&'static str, Value) {
    if i < corral {
        (
            "glob",
            json!({"pattern": "**/*.rs", "path": "tree", "limit": 100000}),
        )
    } else {
        (
            "search_files",
            json!({"path": root.join("tree"), "pattern": "**/*.rs"}),
        )
    }
}

/// `figure(i)` of each server, as cells: corral's per binary, the peers in
/// one cell, and corral's ratio to the fastest peer per binary.
fn row(
    what: &str,
    goal: &str,
    f: &Field,
    cell: impl Fn(usize) -> String,
    figure: impl Fn(usize) -> f64,
    floor: Option<String>,
) -> super::Row {
    let peers: Vec<usize> = (f.corral..f.servers.len()).collect();
    let fastest = peers
        .iter()
        .map(|&i| figure(i))
        .fold(f64::INFINITY, f64::min);
    super::Row {
        what: what.into(),
        bins: (0..f.corral).map(&cell).collect(),
        peer: peers
            .iter()
            .map(|&i| format!("{} {}", f.servers[i].label, cell(i)))
            .chain(floor)
            .collect::<Vec<_>>()
            .join("; "),
        figures: (0..f.corral)
            .map(|i| {
                let r = figure(i) / fastest;
                (format!("{r:.2}× the fastest peer"), r)
            })
            .collect(),
        goal_text: goal.into(),
        goal: super::Goal::AtMost(1.0),
        skipped: None,
    }
}

/// The MCP rows: a small read one at a time, 20 reads at once, a glob.
pub(crate) fn rows(
    cfg: &super::Cfg,
    bins: &[super::Bin],
    rt: &tokio::runtime::Runtime,
    runtime: &corral_runtime::Runtime,
) -> Vec<super::Row> {
    const READ: &str = "MCP: read a 1,957-byte file, one request at a time (median per request, client wall; bytes of the answer)";
    const MANY: &str = "MCP: 20 reads of it sent at once (median until the last answer)";
    const GLOB: &str = "MCP: glob `**/*.rs` over the project's sources (median per request)";
    const GOAL: &str = "≤ 1.0× the fastest peer";
    super::note("MCP servers: corral mcp serve, the reference server, rust-mcp-filesystem…");
    let mut f = match field(bins) {
        Ok(f) => f,
        Err(why) => {
            return [READ, MANY, GLOB]
                .iter()
                .map(|w| super::Row::skipped(w, GOAL, why.clone()))
                .collect();
        }
    };
    let root =
        f.ws.path()
            .canonicalize()
            .unwrap_or_else(|_| f.ws.path().to_owned());
    let n = f.servers.len();
    let mut bytes = vec![0; n];
    let mut found = vec![0; n];
    for (i, s) in f.servers.iter_mut().enumerate() {
        let args = read_args(s, &root);
        let tool = s.read_tool.clone();
        let (answer, b) =
            super::ok(s.request("tools/call", json!({"name": tool, "arguments": args})));
        assert!(
            Server::text(&answer).contains("small source file"),
            "{}: the read did not return the file: {answer}",
            s.label
        );
        bytes[i] = b;
        let (tool, args) = glob_call(i, f.corral, &root);
        let (answer, _) =
            super::ok(s.request("tools/call", json!({"name": tool, "arguments": args})));
        found[i] = Server::text(&answer)
            .lines()
            .filter(|l| l.ends_with(".rs"))
            .count();
        for _ in 0..20 {
            super::ok(s.calls(&s.read_tool.clone(), &read_args(s, &root), 1));
        }
    }
    super::note(&format!(
        "  answer bytes {:?}; `**/*.rs` found {:?}",
        bytes, found
    ));
    let rounds = cfg.rounds * 3;
    let (mut one, mut many, mut glob) = (
        vec![Vec::new(); n],
        vec![Vec::new(); n],
        vec![Vec::new(); n],
    );
    for round in 0..rounds {
        for k in 0..n {
            let i = (k + round) % n;
            let s = &mut f.servers[i];
            let (tool, args) = (s.read_tool.clone(), read_args(s, &root));
            for _ in 0..20 {
                one[i].push(super::ok(s.calls(&tool, &args, 1)).0);
            }
            many[i].push(super::ok(s.calls(&tool, &args, 20)).0);
            let (tool, args) = glob_call(i, f.corral, &root);
            glob[i].push(super::ok(s.calls(tool, &args, 1)).0);
        }
    }
    let (alone, at_once) = in_process(cfg, rt, runtime, &root);
    let med = |v: &[Duration]| super::median_d(v).as_secs_f64();
    vec![
        row(
            READ,
            GOAL,
            &f,
            |i| format!("{}, {} B", super::fmt_d(super::median_d(&one[i])), bytes[i]),
            |i| med(&one[i]),
            Some(format!(
                "the floor: the same `read_file` call in corral's process, no MCP (an instance \
                 made ahead, as `mcp serve` makes them) {}",
                super::fmt_d(alone)
            )),
        ),
        row(
            MANY,
            GOAL,
            &f,
            |i| super::fmt_d(super::median_d(&many[i])),
            |i| med(&many[i]),
            Some(format!(
                "the floor: 20 of those calls at once in corral's process, no MCP {}",
                super::fmt_d(at_once)
            )),
        ),
        row(
            GLOB,
            GOAL,
            &f,
            |i| {
                format!(
                    "{}, {} paths",
                    super::fmt_d(super::median_d(&glob[i])),
                    found[i]
                )
            },
            |i| med(&glob[i]),
            None,
        ),
    ]
}

/// corral's own part of the MCP reads, without MCP: the median of the same
/// `read_file` call in this process, on an instance made ahead (as `mcp
/// serve` makes one after each answer), and of 20 such calls at once until
/// the last ends.
fn in_process(
    cfg: &super::Cfg,
    rt: &tokio::runtime::Runtime,
    runtime: &corral_runtime::Runtime,
    root: &Path,
) -> (Duration, Duration) {
    let plugins = std::sync::Arc::new(super::load(rt, runtime, root, ""));
    let fs = super::ok(plugins.plugin_for("read_file").ok_or("no read_file")).clone();
    let args = json!({"path": "notes.txt"}).to_string();
    let read = |ahead: bool| {
        rt.block_on(async {
            while ahead && !fs.ready_ahead() {
                plugins.make_ahead();
                tokio::task::yield_now().await;
            }
            let started = Instant::now();
            let out = super::ok(plugins.call("read_file", &args, "r").await);
            assert!(out.content.contains("small source file"), "{}", out.content);
            started.elapsed()
        })
    };
    let many = || {
        rt.block_on(async {
            let started = Instant::now();
            let mut set = tokio::task::JoinSet::new();
            for _ in 0..20 {
                let (plugins, args) = (plugins.clone(), args.clone());
                set.spawn(async move { plugins.call("read_file", &args, "r").await });
            }
            while let Some(done) = set.join_next().await {
                assert!(
                    super::ok(super::ok(done))
                        .content
                        .contains("small source file")
                );
            }
            started.elapsed()
        })
    };
    read(false);
    let (mut one, mut twenty) = (Vec::new(), Vec::new());
    for _ in 0..cfg.rounds * 3 {
        for _ in 0..20 {
            one.push(read(true));
        }
        twenty.push(many());
    }
    (super::median_d(&one), super::median_d(&twenty))
}
