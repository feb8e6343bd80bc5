//! A project's MCP servers offer only the tools the user trusted.
//!
//! `corral trust` records the tools each `[mcp.NAME]` of the project's
//! `corral.toml` lists (names, whole descriptions, schemas, effects) in the
//! same store as plugins' reviewed tools ([`ToolReviews`], under
//! `mcp:NAME`). At a later session start, and after
//! `notifications/tools/list_changed`, a tool of such a server that is new
//! or describes itself differently is NOT offered: it is reported, with
//! what changed, until `corral trust` shows it and records it again. This
//! is the stricter of the two choices (offering it with a warning would let
//! a server swap a description carrying instructions to the model between
//! two sessions). A server with no record yet (trusted before its tools
//! could be listed) has what it lists first recorded, as a plugin has. The
//! servers of the user's own file are not pinned: the user wrote them.

use crate::manifest::reviewed::{Reviewed, ToolReviews};
use crate::protocol::ToolSpec;

/// The component key under which a server's tools are kept: the trust
/// record of the manifest covers its command, arguments and url.
pub const REVIEW_KEY: &str = "mcp-server";

/// The name under which the tools of `[mcp.server]` are kept.
pub fn review_name(server: &str) -> String {
    format!("mcp:{server}")
}

/// Where a server's tools are checked against what was trusted.
pub(super) struct Pin {
    pub(super) reviews: ToolReviews,
}

impl Pin {
    /// The tools recorded for `server` if it is a project server (recording
    /// `tools` when nothing was recorded yet); `None` for a user's server.
    pub(super) fn pinned(
        &self,
        server: &str,
        project: bool,
        tools: &[ToolSpec],
    ) -> Option<Vec<Reviewed>> {
        if !project {
            return None;
        }
        let name = review_name(server);
        if let Some(recorded) = self.reviews.get(&name, REVIEW_KEY) {
            return Some(recorded);
        }
        if let Err(e) = self.reviews.record(&name, REVIEW_KEY, tools) {
            tracing::warn!(
                "cannot record the tools of [mcp.{server}] in {}: {e}",
                self.reviews.dir.display()
            );
        }
        self.reviews.get(&name, REVIEW_KEY)
    }
}

/// Why `spec` is not offered under `pinned`, or `None` when it is as trusted.
pub(super) fn refused(pinned: &[Reviewed], spec: &ToolSpec) -> Option<String> {
    let Some(old) = pinned.iter().find(|r| r.name == spec.name) else {
        return Some(format!(
            "the tool `{}` is new since you trusted the project; it is not offered until \
             `corral trust` shows it and you trust it",
            spec.name
        ));
    };
    let effects: Vec<String> = spec.effects.iter().map(|e| e.as_str().to_owned()).collect();
    let mut what = Vec::new();
    if old.description != spec.description {
        what.push("description");
    }
    if old.input_schema != spec.input_schema {
        what.push("schema");
    }
    if old.effects != effects {
        what.push("effects");
    }
    if what.is_empty() {
        return None;
    }
    Some(format!(
        "the tool `{}` changed its {} since you trusted the project; it is not offered until \
         `corral trust` shows the change and you trust it",
        spec.name,
        what.join(" and ")
    ))
}
