//! The third-party MCP servers `.ci/run` installs for the tests.

use crate::support::skip;
use std::path::PathBuf;

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
