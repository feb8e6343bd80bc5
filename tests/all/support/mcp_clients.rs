//! The real MCP clients that drive `corral mcp serve` in the tests: the
//! official Python SDK (tests/mcp/client.py) and any other client program
//! run the same way. The Python interpreter with `mcp` installed is
//! `CORRAL_TEST_PYTHON`, else the virtualenv `.ci/run` keeps in its cache;
//! without either the test is counted as skipped (under CI it fails).

use crate::support::skip;
use crate::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Stdio;

/// The Python interpreter that has the `mcp` package, or why there is none.
pub fn python() -> Result<PathBuf, String> {
    skip::ci_python("CORRAL_TEST_PYTHON", "mcp-venv", "no Python MCP client")
}

/// Runs tests/mcp/client.py with `scenario` against `corral mcp serve` in
/// `ws` (with `serve_args` after `serve`) and returns what it printed.
/// `None` when there is no Python client (the test counted as skipped).
pub fn client(cli: &Cli, ws: &Path, serve_args: &[&str], scenario: Value) -> Option<Value> {
    client_env(cli, ws, serve_args, scenario, &[]).map(|(out, _)| out)
}

/// [`client`] with `env` set for the server (e.g. `CORRAL_LOG`); also
/// returns what the server logged (stderr).
pub fn client_env(
    cli: &Cli,
    ws: &Path,
    serve_args: &[&str],
    scenario: Value,
    env: &[(&str, &str)],
) -> Option<(Value, String)> {
    let python = match python() {
        Ok(p) => p,
        Err(why) => {
            skip::missing(why, skip::CI_RUN);
            return None;
        }
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/mcp/client.py");
    let mut cmd = std::process::Command::new(python);
    cmd.arg(script);
    Some(run_client(
        cmd, "Python", cli, ws, serve_args, scenario, env,
    ))
}

/// Runs an MCP client program `cmd` (its script and leading arguments
/// given) with `scenario` against `corral mcp serve` in `ws`: what it
/// printed, as JSON, and what the server logged (stderr). The client starts
/// the server with its own environment: the test's config, cache and data
/// directories reach corral through it, and `env` is added.
pub fn run_client(
    mut cmd: std::process::Command,
    name: &str,
    cli: &Cli,
    ws: &Path,
    serve_args: &[&str],
    scenario: Value,
    env: &[(&str, &str)],
) -> (Value, String) {
    cmd.arg(scenario.to_string())
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_corral"))
        .args(["mcp", "serve", "--workspace"])
        .arg(ws)
        .args(serve_args)
        .current_dir(ws);
    let out = cli
        .homes(&mut cmd)
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("run the {name} MCP client: {e}"));
    assert!(
        out.status.success(),
        "the {name} MCP client failed: {}\nstdout: {}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    let answered = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "the client's output is not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    (answered, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// The SDK's Python, or `None`, the test counted as skipped, outside CI;
/// CI must have it.
pub fn sdk_python() -> Option<PathBuf> {
    match python() {
        Ok(p) => Some(p),
        Err(why) => {
            skip::missing(why, skip::CI_RUN);
            None
        }
    }
}
