//! What a component could ask for, read from its imports before it is
//! instantiated: whether its grants make each import live or leave it
//! linked to a stub that denies every call, and the load-time refusal of
//! imports corral does not provide.
//!
//! Python and JavaScript toolchains keep every import of their world, used
//! or not (componentize-py always imports `wasi:sockets`), so refusing a
//! component for an ungranted import would make such a plugin ask for a
//! wider sandbox than it needs. Instead the linker serves every interface
//! corral knows, and what the grants do not cover answers each call with an
//! error value: `process.run` with `not-granted`, `wasi:sockets` with
//! `access-denied` (name lookups with `permanent-resolver-failure`),
//! `wasi:http` with `HttpRequestDenied`.

use super::error::LoadError;
use crate::manifest::PluginDecl;

/// A capability a component's imports let it ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Capability {
    /// corral's `host` interface: log lines and the plugin's own settings.
    CorralHost,
    /// Files, through `wasi:filesystem` or corral's `files` (bulk reads);
    /// served only inside `grants.fs`.
    Files,
    /// Environment variables and arguments (`wasi:cli/environment`); only those
    /// in `grants.env`, never arguments.
    Environment,
    /// Standard streams; stdin is empty, stdout and stderr go to the host log.
    Stdio,
    /// Outgoing HTTP (`wasi:http/outgoing-handler`); denied without `grants.net`.
    Http,
    /// Raw sockets and name lookup (`wasi:sockets`); always denied.
    Sockets,
    /// Running programs through the host (`corral:plugin/process`); denied
    /// without `grants.exec`.
    Process,
    /// Clocks, randomness, stream plumbing and exit: harmless.
    Basic,
    /// An interface corral does not provide; such a component cannot load.
    Unknown,
}

impl Capability {
    /// What the capability means for the user, in a few words.
    pub fn describe(self) -> &'static str {
        match self {
            Capability::CorralHost => {
                "corral's host services: log lines, its own settings, stream events, the answer's text"
            }
            Capability::Files => "files (only directories in grants.fs)",
            Capability::Environment => "environment variables (only those in grants.env)",
            Capability::Stdio => "standard streams (stdin empty; output to the host log)",
            Capability::Http => "outgoing HTTP (denied without grants.net)",
            Capability::Sockets => "raw network sockets (always denied)",
            Capability::Process => "running programs through the host (denied without grants.exec)",
            Capability::Basic => "clocks, randomness, streams, exit",
            Capability::Unknown => "not provided by corral: the plugin cannot load",
        }
    }
}

/// The capability behind one import name such as `wasi:http/outgoing-handler@0.2.6`.
pub fn classify(import: &str) -> Capability {
    let name = import.split('@').next().unwrap_or(import);
    match name {
        "corral:plugin/host"
        | "corral:plugin/types"
        | "corral:plugin/chat"
        | "corral:plugin/stream"
        | "corral:plugin/answer" => Capability::CorralHost,
        "corral:plugin/process" => Capability::Process,
        "corral:plugin/files" => Capability::Files,
        "wasi:cli/environment" => Capability::Environment,
        "wasi:cli/stdin" | "wasi:cli/stdout" | "wasi:cli/stderr" => Capability::Stdio,
        "wasi:cli/exit" => Capability::Basic,
        "wasi:http/outgoing-handler" => Capability::Http,
        // Types alone can build requests but never send them.
        "wasi:http/types" => Capability::Basic,
        _ if name.starts_with("wasi:cli/terminal-") => Capability::Stdio,
        _ if name.starts_with("wasi:filesystem/") => Capability::Files,
        _ if name.starts_with("wasi:sockets/") => Capability::Sockets,
        _ if name.starts_with("wasi:clocks/")
            || name.starts_with("wasi:random/")
            || name.starts_with("wasi:io/") =>
        {
            Capability::Basic
        }
        _ => Capability::Unknown,
    }
}

/// How corral serves one import of one plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// Served, within the plugin's grants.
    Live,
    /// Linked to a stub that denies every use, because no grant covers it.
    Denied,
    /// Not provided by corral: the plugin is refused at load.
    Refused,
}

/// One import of a plugin, judged against its grants.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ImportReview {
    /// The interface, such as `wasi:http/outgoing-handler@0.2.6`.
    pub name: String,
    /// What it lets the plugin ask for.
    pub capability: Capability,
    /// Whether the plugin gets it.
    pub status: Status,
    /// What the plugin gets through it, in a few words.
    pub note: String,
}

/// Judges `import` against the grants of `decl`: what is not granted is
/// linked to a stub that denies every call with an error value the plugin
/// can report, and only what corral does not know is refused.
pub fn review(decl: &PluginDecl, import: &str) -> ImportReview {
    let capability = classify(import);
    let (status, note) = match capability {
        Capability::Process if decl.exec.is_empty() => (
            Status::Denied,
            "process.run answers not-granted (no grants.exec)".to_owned(),
        ),
        Capability::Process => (
            Status::Live,
            "only the programs in grants.exec, for tools that declare execute".to_owned(),
        ),
        Capability::Http if decl.net.is_empty() => (
            Status::Denied,
            "every request is HttpRequestDenied (no grants.net)".to_owned(),
        ),
        Capability::Http => (
            Status::Live,
            "only the destinations in grants.net, for tools that declare network".to_owned(),
        ),
        // grants.net names HTTP destinations, checked per request; a raw
        // socket would go around that check, so no grant opens one.
        Capability::Sockets => (
            Status::Denied,
            "every socket is access-denied and name lookups fail (grants.net covers HTTP only)"
                .to_owned(),
        ),
        Capability::Files if decl.fs.is_empty() => (
            Status::Denied,
            "no directory is visible (no grants.fs)".to_owned(),
        ),
        Capability::Unknown => (Status::Refused, unknown_cause(import).to_owned()),
        other => (Status::Live, other.describe().to_owned()),
    };
    ImportReview {
        name: import.to_owned(),
        capability,
        status,
        note,
    }
}

/// Why a component may import an interface corral does not know, and what
/// to do about it.
fn unknown_cause(import: &str) -> &'static str {
    let name = import.split('@').next().unwrap_or(import);
    if name.starts_with("jco:node/") || name.starts_with("node:") {
        "built with Node.js shims; rebuild without --bundle/node imports"
    } else {
        "corral does not provide it; build the plugin for corral:plugin@0.1.0 and WASI 0.2 only"
    }
}

/// The refusal of a component that imports interfaces corral does not
/// provide, naming each with its likely cause; `None` when it imports none.
/// Everything else it may import: what its grants do not cover is denied
/// per call (see [`review`]).
pub(crate) fn refusal(imports: &[String]) -> Option<String> {
    let unknown: Vec<String> = imports
        .iter()
        .filter(|i| classify(i) == Capability::Unknown)
        .map(|i| format!("{i} ({})", unknown_cause(i)))
        .collect();
    (!unknown.is_empty()).then(|| {
        format!(
            "it imports what corral does not provide, so it cannot load: {}",
            unknown.join(", ")
        )
    })
}

/// Refuses a component that imports an interface corral does not provide;
/// the message names the plugin, where it is declared, each such import and
/// its likely cause.
pub(crate) fn check(decl: &PluginDecl, imports: &[String]) -> Result<(), LoadError> {
    match refusal(imports) {
        Some(why) => Err(LoadError(format!(
            "plugin `{}` ({}): {why}",
            decl.name, decl.origin
        ))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_shims_are_told_apart_from_other_hosts() {
        let why = refusal(&[
            "wasi:io/poll@0.2.6".to_owned(),
            "jco:node/fs".to_owned(),
            "node:fs/promises".to_owned(),
            "acme:widgets/frob@1.0.0".to_owned(),
        ])
        .unwrap_or_default();
        assert!(
            why.contains(
                "jco:node/fs (built with Node.js shims; rebuild without --bundle/node imports)"
            ),
            "{why}"
        );
        assert!(
            why.contains("node:fs/promises (built with Node.js"),
            "{why}"
        );
        assert!(
            why.contains("acme:widgets/frob@1.0.0 (corral does not provide it;"),
            "{why}"
        );
        assert!(!why.contains("wasi:io"), "{why}");
        assert_eq!(refusal(&["wasi:sockets/tcp@0.2.6".to_owned()]), None);
    }
}
