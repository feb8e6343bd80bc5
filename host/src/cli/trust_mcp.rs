//! `corral trust` and the project's MCP servers: their tools are recorded
//! when the project is trusted, and a session offers only those (see
//! `corral_core::mcp_client`'s pinning). A server runs only once the file is
//! trusted: for a new or changed file its tools are listed after you
//! confirm; for a trusted file whose servers now list new or changed tools,
//! the difference is shown and asks again.

use corral_core::manifest::{self, reviewed::ToolReviews};
use corral_core::mcp_client::{McpTools, REVIEW_KEY, review_name};
use corral_protocol::ToolSpec;
use corral_protocol::terminal::inert;

/// Each project server's tools, or why they cannot be listed.
pub(super) type Listed = Vec<(String, Result<Vec<ToolSpec>, String>)>;

/// Starts the project's servers of `checked` (confined, as a session does)
/// and lists their tools.
pub(super) async fn list(checked: &manifest::Manifest) -> Listed {
    let decls: Vec<manifest::McpServerDecl> =
        checked.mcp.iter().filter(|d| d.project).cloned().collect();
    if decls.is_empty() {
        return Vec::new();
    }
    let dir = corral_core::session::sessions_dir(&checked.workspace)
        .unwrap_or_else(|_| std::env::temp_dir().join("corral-mcp"))
        .join("mcp");
    let tools = McpTools::start(&decls, &dir).await;
    let all = tools.tools();
    decls
        .iter()
        .map(|d| {
            let listed = match tools.failed().iter().find(|(s, _)| *s == d.name) {
                Some((_, why)) => Err(why.clone()),
                None => Ok(all
                    .iter()
                    .filter(|t| t.server() == d.name)
                    .map(|t| t.spec.clone())
                    .collect()),
            };
            (d.name.clone(), listed)
        })
        .collect()
}

/// What changed in the tools of `listed` since they were recorded, in
/// words (empty when nothing did; a server never recorded counts as new).
pub(super) fn changes(reviews: Option<&ToolReviews>, listed: &Listed) -> String {
    let Some(reviews) = reviews else {
        return String::new();
    };
    let mut text = String::new();
    for (server, tools) in listed {
        let Ok(tools) = tools else { continue };
        let name = review_name(server);
        let Some(old) = reviews.get(&name, REVIEW_KEY) else {
            text.push_str(&format!(
                "  [mcp.{server}] lists tools that were never recorded: {}\n",
                names(tools)
            ));
            continue;
        };
        let old_names: Vec<&str> = old.iter().map(|r| r.name.as_str()).collect();
        let same = old.len() == tools.len()
            && tools.iter().all(|t| {
                old.iter().any(|r| {
                    r.name == t.name
                        && r.description == t.description
                        && r.input_schema == t.input_schema
                        && r.effects
                            == t.effects
                                .iter()
                                .map(|e| e.as_str().to_owned())
                                .collect::<Vec<_>>()
                })
            });
        if same {
            continue;
        }
        text.push_str(&format!(
            "  [mcp.{server}] (trusted tools: {}) now lists:\n",
            old_names.join(", ")
        ));
        for t in tools {
            text.push_str(&super::toolview::tool(t));
        }
    }
    text
}

/// The names of `tools`, for a message.
fn names(tools: &[ToolSpec]) -> String {
    tools
        .iter()
        .map(|t| t.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Records the tools of `listed` as trusted; says what it recorded.
pub(super) fn record(reviews: Option<&ToolReviews>, listed: &Listed) -> Result<String, String> {
    let mut text = String::new();
    for (server, tools) in listed {
        match (tools, reviews) {
            (Ok(tools), Some(reviews)) => {
                reviews
                    .record(&review_name(server), REVIEW_KEY, tools)
                    .map_err(|e| format!("cannot record the tools of [mcp.{server}]: {e}"))?;
                text.push_str(&format!(
                    "recorded the tools of [mcp.{server}]: {}\n",
                    names(tools)
                ));
            }
            (Ok(_), None) => {}
            (Err(why), _) => text.push_str(&format!(
                "the tools of [mcp.{server}] could not be listed ({}); a session records what it \
                 first lists\n",
                inert(why)
            )),
        }
    }
    Ok(text)
}

/// What the project's servers of `checked` would do once trusted, beyond
/// what the file's text says at a glance: the url a remote server is sent
/// to, with the variables whose values go there in headers.
pub(super) fn describe(checked: &manifest::Manifest) -> String {
    let mut text = String::new();
    for d in checked.mcp.iter().filter(|d| d.project) {
        let Some(url) = &d.url else { continue };
        let vars: Vec<String> = d.secrets.iter().flat_map(|s| s.env_vars()).collect();
        text.push_str(&format!(
            "  [mcp.{}] connects to {}{}\n",
            d.name,
            inert(url),
            if vars.is_empty() {
                String::new()
            } else {
                format!(
                    " and sends it the value of {} (in the header(s) {})",
                    vars.join(", "),
                    d.secrets
                        .iter()
                        .map(|s| s.header.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        ));
    }
    if text.is_empty() {
        return text;
    }
    format!(
        "\nMCP servers the project connects to (their tools are recorded once you trust it):\n{text}"
    )
}
