//! What a component could ask for, read from its imports before it is
//! instantiated, and the load-time check of those imports against the grants.

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
    /// Outgoing HTTP (`wasi:http/outgoing-handler`); needs `grants.net`.
    Http,
    /// Raw sockets and name lookup (`wasi:sockets`); needs `grants.net`.
    Sockets,
    /// Running programs through the host (`corral:plugin/process`); needs `grants.exec`.
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
                "corral's host services: log lines, its own settings, stream events"
            }
            Capability::Files => "files (only directories in grants.fs)",
            Capability::Environment => "environment variables (only those in grants.env)",
            Capability::Stdio => "standard streams (stdin empty; output to the host log)",
            Capability::Http => "outgoing HTTP (needs grants.net)",
            Capability::Sockets => "raw network sockets (needs grants.net)",
            Capability::Process => "running programs through the host (needs grants.exec)",
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
        | "corral:plugin/stream" => Capability::CorralHost,
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

/// Refuses a component whose imports ask for what its grants cannot serve.
/// The message names the import, the manifest entry and the line that would
/// allow it.
pub(crate) fn check(decl: &PluginDecl, imports: &[String]) -> Result<(), String> {
    for import in imports {
        let name = &decl.name;
        let at = &decl.origin;
        match classify(import) {
            Capability::Http | Capability::Sockets if decl.net.is_empty() => {
                return Err(format!(
                    "plugin `{name}` imports {import} but grants.net is empty ({at}); \
                     add grants.net = [\"https://HOST:443\"] to [plugins.{name}] to allow the hosts it needs"
                ));
            }
            Capability::Process if decl.exec.is_empty() => {
                return Err(format!(
                    "plugin `{name}` imports {import} but grants.exec is empty ({at}); \
                     add grants.exec = [{{ program = \"NAME\", args = [\"**\"] }}] to [plugins.{name}] to allow the programs it needs"
                ));
            }
            Capability::Unknown => {
                return Err(format!(
                    "plugin `{name}` ({at}) imports {import}, which corral does not provide; \
                     it was built for another host or a newer corral"
                ));
            }
            _ => {}
        }
    }
    Ok(())
}
