//! `corral mcp serve`: the tool plugins' tools served to an MCP client over
//! stdio. The server is [`corral_mcp`]; stdout belongs to the protocol, so
//! everything else (errors, logs) goes to stderr.
//!
//! `corral mcp add | list | remove | import`: the `[mcp.NAME]` servers whose
//! tools corral uses (see [`corral_core::mcp_client`]).

use super::fail;
use clap::Subcommand;
use corral_mcp::{ServeOptions, Server};
use corral_protocol::Mode;
use std::path::Path;
use std::process::ExitCode;

#[path = "mcp_servers.rs"]
mod servers;

/// A message printed on success, or the error.
fn finish(result: Result<String, String>) -> ExitCode {
    match result {
        Ok(done) => {
            super::out(&done);
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}

/// `corral mcp …`.
#[derive(Subcommand)]
pub enum McpCmd {
    /// Serve every tool over MCP on stdin/stdout, for Claude Code, Codex or
    /// any MCP client. The manifest's grants and the permission policy hold
    /// for the client's calls.
    Serve {
        /// Permission mode: read-only, ask (default), auto-edit, full-auto.
        /// In `ask`, a call that asks is put to the user through the client
        /// (MCP elicitation), or refused when the client cannot ask.
        #[arg(long)]
        mode: Option<Mode>,
    },
    /// Add an MCP server: `corral mcp add NAME [--grant …] -- CMD ARGS…`, or
    /// `corral mcp add NAME --url URL [--secret HEADER=VALUE]`.
    /// It runs confined: it may read and write only the directories granted
    /// (`--grant fs:DIR`), gets only the variables granted (`--grant
    /// env:NAME`) and no network unless granted (`--grant net`).
    Add {
        /// The entry's name; its tools are offered as `NAME__tool`.
        name: String,
        /// `fs:DIR` (read and write beneath DIR), `env:NAME` (pass the
        /// variable through), `net` (TCP connections). Repeatable.
        #[arg(long = "grant", value_name = "GRANT")]
        grants: Vec<String>,
        /// `KEY=VALUE` set for the server. Repeatable.
        #[arg(long = "env", value_name = "KEY=VALUE")]
        env: Vec<String>,
        /// Write to the project's corral.toml (which then needs `corral
        /// trust`) instead of the user's.
        #[arg(long)]
        project: bool,
        /// A streamable HTTP server's URL, instead of a command: corral
        /// connects to it itself, to that origin only.
        #[arg(long, value_name = "URL", conflicts_with_all = ["grants", "env", "command"])]
        url: Option<String>,
        /// `HEADER=VALUE`, for a `--url` server: a header corral adds to its
        /// requests to that origin, e.g. `authorization=Bearer ${env:TOKEN}`
        /// (`${env:NAME}` is read from corral's environment). Repeatable.
        #[arg(long = "secret", value_name = "HEADER=VALUE", requires = "url")]
        secrets: Vec<String>,
        /// Install the package a `npx -y PKG` / `uvx PKG` / `pipx run PKG` /
        /// `python -m PKG` command fetches at each start into corral's
        /// package store without asking (otherwise asked on a terminal;
        /// without one, the entry is written as given).
        #[arg(long, short)]
        yes: bool,
        /// The command that starts the server, and its arguments.
        #[arg(last = true, required_unless_present = "url", value_name = "CMD")]
        command: Vec<String>,
    },
    /// List the MCP servers of the manifest, with their grants.
    List {
        /// One JSON array.
        #[arg(long)]
        json: bool,
    },
    /// Remove an MCP server's entry.
    Remove {
        /// The entry's name.
        name: String,
        /// From the project's corral.toml instead of the user's.
        #[arg(long)]
        project: bool,
    },
    /// Import the servers of a Claude Code `.mcp.json` or of a Codex
    /// `config.toml` (`[mcp_servers]`): shows what each entry would be
    /// granted, and writes only with `--yes`.
    Import {
        /// The file to import.
        file: std::path::PathBuf,
        /// Write to the project's corral.toml instead of the user's.
        #[arg(long)]
        project: bool,
        /// Write the entries (otherwise only show them).
        #[arg(long, short)]
        yes: bool,
    },
}

pub async fn mcp(workspace: &Path, cmd: McpCmd) -> ExitCode {
    match cmd {
        McpCmd::Add {
            name,
            grants,
            env,
            project,
            url,
            secrets,
            yes,
            command,
        } => finish(match url {
            Some(url) => servers::add_url(workspace, &name, &url, &secrets, project),
            None => {
                let given = servers::Given {
                    grants: &grants,
                    env: &env,
                    project,
                    yes,
                };
                servers::add(workspace, &name, &given, &command)
            }
        }),
        McpCmd::List { json } => servers::list(workspace, json),
        McpCmd::Remove { name, project } => finish(servers::remove(workspace, &name, project)),
        McpCmd::Import { file, project, yes } => {
            finish(servers::import(workspace, &file, project, yes))
        }
        McpCmd::Serve { mode } => {
            let options = ServeOptions {
                workspace: workspace.to_path_buf(),
                mode,
                ..ServeOptions::default()
            };
            // The manifest is read first: a mistake in it stops the server
            // before any client talks to it. The plugins load while it serves.
            let manifest = match corral_core::manifest::load(workspace) {
                Ok(m) => m,
                Err(e) => return fail(&e.to_string()),
            };
            let options = ServeOptions {
                manifest: Some(manifest),
                ..options
            };
            match Server::serve_stdio_loading(options).await {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => fail(&e.to_string()),
            }
        }
    }
}
