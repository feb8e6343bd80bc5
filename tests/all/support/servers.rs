//! The MCP servers the tests run: the third-party ones `.ci/run` installs,
//! and the ones written for the tests (tests/mcp), hostile on purpose or
//! made to crash and change their tools.

use crate::Sandbox;
use crate::support::skip;
use std::path::{Path, PathBuf};

/// A program of the MCP servers `.ci/run` installs (`npm/…`, `py/…` under
/// `CORRAL_TEST_MCP_SERVERS`), or `None`, the test counted as skipped
/// ([`skip::missing`]: under `CORRAL_CI` it fails instead).
pub fn installed(rel: &str) -> Option<PathBuf> {
    let Some(root) = std::env::var_os("CORRAL_TEST_MCP_SERVERS") else {
        skip::missing(
            "CORRAL_TEST_MCP_SERVERS is unset (the third-party MCP servers)",
            skip::CI_RUN,
        );
        return None;
    };
    let p = PathBuf::from(root).join(rel);
    if p.exists() {
        return Some(p);
    }
    skip::missing(format!("{} is not installed", p.display()), skip::CI_RUN);
    None
}

/// The reference filesystem server (`mcp-server-filesystem`), a fresh
/// sandbox and its workspace's canonical path (the form the server names
/// it by); `None` where the server is not installed ([`installed`]).
pub fn filesystem_in_sandbox() -> Option<(PathBuf, Sandbox, PathBuf)> {
    let fs = installed("npm/node_modules/.bin/mcp-server-filesystem")?;
    let sb = Sandbox::new();
    let ws = sb.ws().canonicalize().expect("ws");
    Some((fs, sb, ws))
}

/// Writes `turns` as the replay provider's cassette and a manifest that
/// runs the reference filesystem server `fs` over `ws` as `files` (the
/// workspace granted, `mcp` appended to its table), the replay provider
/// reading the cassette, and `rest` last.
pub fn filesystem_replay(
    sb: &Sandbox,
    fs: &Path,
    ws: &Path,
    turns: &[serde_json::Value],
    mcp: &str,
    rest: &str,
) {
    super::cassette::write(sb, "mcp.cassette.json", turns);
    sb.write(
        "corral.toml",
        &format!(
            "[mcp.files]\ncommand = {:?}\nargs = [{:?}]\ngrants = {{ fs = [\".\"] }}\n\
             timeout_ms = 20000\n{mcp}\n\
             [plugins.replay]\nsource = \"builtin:replay\"\n\
             grants.fs = [{{ path = \".\", access = \"ro\" }}]\n\
             config = {{ cassette = \"mcp.cassette.json\" }}\n{rest}",
            fs.display().to_string(),
            ws.display().to_string(),
        ),
    );
}

/// The lifecycle server's script, copied into the workspace.
pub fn lifecycle_script(sb: &Sandbox) -> PathBuf {
    let from =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/mcp/lifecycle_server.py");
    let to = sb.ws().join("lifecycle_server.py");
    std::fs::copy(from, &to).expect("copy the lifecycle server");
    to
}

/// The interpreter that runs the hostile server: the system's, so that
/// nothing in the user's home is needed to run it.
pub const SYSTEM_PYTHON: &str = "/usr/bin/python3";

/// Whether the hostile server can run here; the test is counted as skipped
/// when not.
pub fn hostile_runnable() -> bool {
    if Path::new(SYSTEM_PYTHON).exists() {
        return true;
    }
    crate::support::skip::missing(
        format!("{SYSTEM_PYTHON} is not installed"),
        "apt-get install python3",
    );
    false
}

/// The hostile server's script, copied into the workspace (which the
/// server is granted), so that it can read its own code.
pub fn hostile_script(sb: &Sandbox) -> PathBuf {
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/mcp/hostile_server.py");
    let to = sb.ws().join("hostile_server.py");
    std::fs::copy(from, &to).expect("copy the hostile server");
    to
}
