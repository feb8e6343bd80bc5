//! Another MCP client's configuration, imported by `corral mcp import`.

use crate::support::output::stderr;
use crate::*;
use std::process::Output;

/// Writes `text` as the file `name` outside the workspace and imports it
/// with `corral mcp import FILE --yes`, which must succeed; its output.
pub fn import_config(cli: &Cli, sb: &Sandbox, name: &str, text: &str) -> Output {
    let file = sb.outside().join(name);
    std::fs::write(&file, text).expect("write");
    let o = cli.run(
        &sb.ws(),
        &["mcp", "import", &file.display().to_string(), "--yes"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    o
}
