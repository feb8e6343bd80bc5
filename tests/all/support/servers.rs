//! The third-party MCP servers `.ci/run` installs for the tests.

use std::path::PathBuf;

/// A program of the MCP servers `.ci/run` installs (`npm/…`, `py/…` under
/// `CORRAL_TEST_MCP_SERVERS`), or `None`, having said why the test is
/// skipped. Under `CORRAL_CI` the servers must be there: it fails instead.
pub fn installed(rel: &str) -> Option<PathBuf> {
    let Some(root) = std::env::var_os("CORRAL_TEST_MCP_SERVERS") else {
        assert!(
            std::env::var_os("CORRAL_CI").is_none(),
            "CORRAL_TEST_MCP_SERVERS must be set under CORRAL_CI (.ci/run installs the servers)"
        );
        eprintln!("skipped: CORRAL_TEST_MCP_SERVERS is unset (.ci/run installs the servers)");
        return None;
    };
    let p = PathBuf::from(root).join(rel);
    if p.exists() {
        return Some(p);
    }
    assert!(
        std::env::var_os("CORRAL_CI").is_none(),
        "{} is not installed under CORRAL_CI",
        p.display()
    );
    eprintln!("skipped: {} is not installed", p.display());
    None
}
