//! The MCP servers an editor passes in `session/new` as `[mcp.NAME]`
//! entries of one more manifest layer, written as a user would write them:
//! the command, its arguments and the variables the editor set — and no
//! grants. Each server then runs confined like any other: it reads and
//! writes no directory, reaches no network and sees none of corral's
//! environment, whatever its arguments ask for (a filesystem server given
//! `/` still reads nothing). A `[mcp.NAME]` of the user's or the trusted
//! project's manifest with the same name wins, so grants are given there.

use crate::rpc::RpcError;
use corral_core::manifest::{Layer, Manifest};
use serde_json::Value;
use std::path::Path;

/// Most servers one session takes from the editor.
const MAX_SERVERS: usize = 32;

/// What the editor's servers add: the layer (none when they add nothing)
/// and, for each server left out, why.
#[derive(Debug, Default)]
pub struct Added {
    /// `[mcp.NAME]` entries.
    pub layer: Option<Layer>,
    /// Servers not taken, each with the reason.
    pub skipped: Vec<String>,
}

/// The layer of `servers` (ACP `McpServer` objects) for a session in
/// `workspace` whose manifest is `base`.
pub fn layer(workspace: &Path, base: &Manifest, servers: &Value) -> Result<Added, RpcError> {
    let servers = match servers {
        Value::Null => return Ok(Added::default()),
        Value::Array(list) => list,
        _ => return Err(RpcError::params("`mcpServers` must be an array")),
    };
    if servers.len() > MAX_SERVERS {
        return Err(RpcError::params(format!(
            "{} MCP servers were passed; a session takes at most {MAX_SERVERS}",
            servers.len()
        )));
    }
    let mut added = Added::default();
    let mut table = toml::Table::new();
    for server in servers {
        match entry(server) {
            Ok((name, _)) if base.mcp.iter().any(|m| m.name == name) => added.skipped.push(
                format!("`{name}`: corral's manifest has an [mcp.{name}] entry, which is used"),
            ),
            Ok((name, _)) if table.contains_key(&name) => added
                .skipped
                .push(format!("`{name}`: passed twice; the first is used")),
            Ok((name, entry)) => {
                table.insert(name, toml::Value::Table(entry));
            }
            Err(why) => added.skipped.push(why),
        }
    }
    if !table.is_empty() {
        let mut file = toml::Table::new();
        file.insert("mcp".into(), toml::Value::Table(table));
        added.layer = Some(Layer {
            name: "the editor's MCP servers (session/new)".into(),
            text: toml::to_string(&file).map_err(|e| RpcError::params(e.to_string()))?,
            base: workspace.to_path_buf(),
        });
    }
    Ok(added)
}

/// One stdio server as an `[mcp.NAME]` entry, or why it is left out.
fn entry(server: &Value) -> Result<(String, toml::Table), String> {
    let raw_name = server["name"].as_str().unwrap_or_default();
    let shown = corral_protocol::terminal::inert_line(raw_name);
    if let Some(kind) = server["type"].as_str()
        && kind != "stdio"
    {
        return Err(format!(
            "`{shown}`: a {kind} server; corral takes stdio servers from the editor (add an \
             HTTP server with `corral mcp add {shown} --url URL`)"
        ));
    }
    let name = sanitize(raw_name).ok_or_else(|| {
        format!("`{shown}`: not a usable name (letters, digits, `-` and `_`, at most 64)")
    })?;
    let command = server["command"]
        .as_str()
        .filter(|c| !c.is_empty())
        .ok_or_else(|| format!("`{shown}`: no command"))?;
    let mut entry = toml::Table::new();
    entry.insert("command".into(), command.into());
    let args: Vec<toml::Value> = server["args"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).map(Into::into).collect())
        .unwrap_or_default();
    entry.insert("args".into(), toml::Value::Array(args));
    let mut env = toml::Table::new();
    for var in server["env"].as_array().into_iter().flatten() {
        if let (Some(k), Some(v)) = (var["name"].as_str(), var["value"].as_str()) {
            env.insert(k.to_owned(), v.into());
        }
    }
    entry.insert("env".into(), toml::Value::Table(env));
    Ok((name, entry))
}

/// `name` as a manifest entry name, when it can be one.
fn sanitize(name: &str) -> Option<String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        && corral_core::manifest::valid_plugin_name(name);
    ok.then(|| name.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_server_becomes_an_entry_without_grants() {
        let (name, entry) = entry(&json!({
            "name": "files",
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-filesystem", "/"],
            "env": [{"name": "A", "value": "1"}],
        }))
        .unwrap();
        assert_eq!(name, "files");
        assert!(!entry.contains_key("grants"), "{entry:?}");
        assert_eq!(entry["args"].as_array().unwrap().len(), 3);
        assert_eq!(entry["env"]["A"].as_str(), Some("1"));
    }

    #[test]
    fn bad_names_and_other_transports_are_left_out_with_a_reason() {
        let e = entry(&json!({"name": "a\u{1b}[2Jb", "command": "x"})).unwrap_err();
        assert!(!e.contains('\u{1b}'), "{e}");
        let e = entry(&json!({"type": "http", "name": "h", "url": "http://x"})).unwrap_err();
        assert!(e.contains("stdio"), "{e}");
        assert!(entry(&json!({"name": "n"})).is_err());
    }
}
