//! Whole-process cost of one warm `corral tool call`: a Rust tool plugin
//! against a Python one (componentize-py, ~18 MB component, ~35 MB compiled),
//! with several other plugins installed, measured interleaved in one run.
//!
//! `cargo bench -p corral --bench plugins`
//!
//! The workspace declares the built-in plugins, the SDK's example plugin
//! (`word_count`, Rust), the Python plugin built from
//! `benches/python-tool/app.py` (`py_word_count`) and two more test
//! plugins. Both tools count the words of the same small file. Every
//! command runs the real `corral` binary with its own cache directory,
//! after one warm-up call of each tool (so components are compiled and tool
//! descriptions cached). The same pair is also timed with the description
//! cache off (`CORRAL_TOOL_CACHE=off`), which makes every command compile or
//! load and describe every plugin, as corral did before that cache.
//!
//! The Python plugin is built with componentize-py, found through
//! `CORRAL_COMPONENTIZE_PY` (the path of its executable), else at
//! `${CORRAL_CI_CACHE:-$HOME/.cache/corral-ci}/plugin-py/bin/componentize-py`;
//! without it only the Rust half runs. `CORRAL_BENCH_ITERS` sets the number
//! of timed calls per case (default 25).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

#[expect(clippy::print_stdout, reason = "a benchmark reports on stdout")]
fn report(line: &str) {
    println!("{line}");
}

fn ok<T, E: std::fmt::Display>(r: Result<T, E>) -> T {
    r.unwrap_or_else(|e| panic!("{e}"))
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
             (python3 -m venv {0}/.. && pip install componentize-py==0.25.1)",
            p.display()
        ))
    }
}

/// Builds the Python tool plugin into `out`.
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

struct Env {
    home: tempfile::TempDir,
    ws: PathBuf,
}

impl Env {
    fn corral(&self, args: &[&str], cache: bool) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_corral"));
        cmd.args(args)
            .arg("--workspace")
            .arg(&self.ws)
            .current_dir(&self.ws)
            .env("XDG_CONFIG_HOME", self.home.path().join("config"))
            .env("XDG_CACHE_HOME", self.home.path().join("cache"))
            .env("XDG_DATA_HOME", self.home.path().join("data"))
            .env_remove("CORRAL_LOG")
            .env_remove("CORRAL_TOOL_CACHE");
        if !cache {
            cmd.env("CORRAL_TOOL_CACHE", "off");
        }
        cmd
    }

    /// Runs `corral tool call`, checks its output, returns its wall time.
    fn call(&self, tool: &str, args: &str, cache: bool) -> Duration {
        let mut cmd = self.corral(&["tool", "call", tool, "--args", args], cache);
        let t = Instant::now();
        let o = ok(cmd.output());
        let elapsed = t.elapsed();
        assert!(
            o.status.success() && String::from_utf8_lossy(&o.stdout).trim() == "5",
            "{tool}: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        elapsed
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn main() {
    let iters: usize = std::env::var("CORRAL_BENCH_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(25)
        .max(1);
    let home = ok(tempfile::tempdir());
    let ws = home.path().join("ws");
    ok(std::fs::create_dir_all(ws.join("tools")));
    ok(std::fs::write(
        ws.join("small.txt"),
        "one two three four five\n",
    ));
    let env = Env { home, ws };

    let python = match componentize_py() {
        Ok(c) => {
            let out = env.ws.join("tools/python.wasm");
            let t = Instant::now();
            match build_python(&c, &out) {
                Ok(()) => {
                    let size = std::fs::metadata(&out).map_or(0, |m| m.len());
                    report(&format!(
                        "built the Python plugin with {} in {:.1} s: {:.1} MiB",
                        c.display(),
                        t.elapsed().as_secs_f64(),
                        size as f64 / f64::from(1 << 20)
                    ));
                    true
                }
                Err(e) => {
                    report(&format!("Python half skipped: {e}"));
                    false
                }
            }
        }
        Err(why) => {
            report(&format!("Python half skipped: {why}"));
            false
        }
    };

    for (from, to) in [
        (corral_test_programs::EXAMPLE, "example.wasm"),
        (corral_test_programs::ECHO, "echo.wasm"),
        (corral_test_programs::TRUSTPIN, "named.wasm"),
    ] {
        ok(std::fs::copy(from, env.ws.join("tools").join(to)));
    }
    let mut manifest = String::from(
        "[plugins.example]\nsource = \"tools/example.wasm\"\n\
         grants.fs = [{ path = \".\", access = \"ro\" }]\n\n\
         [plugins.echo]\nsource = \"tools/echo.wasm\"\n\n\
         [plugins.named]\nsource = \"tools/named.wasm\"\nconfig = { tool = \"named_tool\" }\n",
    );
    if python {
        manifest.push_str(
            "\n[plugins.python]\nsource = \"tools/python.wasm\"\n\
             grants.fs = [{ path = \".\", access = \"ro\" }]\n",
        );
    }
    ok(std::fs::write(env.ws.join("corral.toml"), manifest));
    let o = ok(env.corral(&["trust", "--yes"], true).output());
    assert!(
        o.status.success(),
        "trust: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = ok(env.corral(&["plugin", "list", "--json"], true).output());
    let listed: serde_json::Value = ok(serde_json::from_slice(&o.stdout));
    let names: Vec<&str> = listed
        .as_array()
        .map(|a| a.iter().filter_map(|p| p["name"].as_str()).collect())
        .unwrap_or_default();
    report(&format!(
        "{} plugins installed: {}",
        names.len(),
        names.join(", ")
    ));

    let rust = ("word_count", r#"{"path":"small.txt"}"#);
    let py = ("py_word_count", r#"{"path":"small.txt"}"#);
    let mut cases: Vec<(&str, (&str, &str), bool)> =
        vec![("rust", rust, true), ("rust, cache off", rust, false)];
    if python {
        cases.push(("python", py, true));
        cases.push(("python, cache off", py, false));
    }
    // Warm-up: compiles every component and fills the description cache.
    for (_, (tool, args), cache) in &cases {
        env.call(tool, args, *cache);
    }
    let mut times: Vec<Vec<Duration>> = vec![Vec::with_capacity(iters); cases.len()];
    for i in 0..iters {
        // Interleaved, starting with a different case each round, so that
        // drift on a shared machine falls on every case alike.
        for k in 0..cases.len() {
            let c = (i + k) % cases.len();
            let (_, (tool, args), cache) = cases[c];
            times[c].push(env.call(tool, args, cache));
        }
    }
    let medians: Vec<Duration> = times.into_iter().map(median).collect();
    report(&format!(
        "\nwarm `corral tool call`, whole process, median of {iters} interleaved runs:"
    ));
    for ((name, (tool, _), _), m) in cases.iter().zip(&medians) {
        report(&format!("  {name:18} {tool:14} {:>10}", ms(*m)));
    }
    let ratio = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64();
    report(&format!(
        "  rust: cache off / on          {:.2}x",
        ratio(medians[1], medians[0])
    ));
    if python {
        report(&format!(
            "  python: cache off / on        {:.2}x",
            ratio(medians[3], medians[2])
        ));
        report(&format!(
            "  python / rust, cache on       {:.2}x",
            ratio(medians[2], medians[0])
        ));
        report(&format!(
            "  python / rust, cache off      {:.2}x",
            ratio(medians[3], medians[1])
        ));
    }
}
