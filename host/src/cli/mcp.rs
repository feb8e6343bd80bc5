//! `corral mcp serve`: the tool plugins' tools served to an MCP client over
//! stdio. The server is [`corral_mcp`]; stdout belongs to the protocol, so
//! everything else (errors, logs) goes to stderr.

use super::fail;
use clap::Subcommand;
use corral_mcp::{ServeOptions, Server};
use corral_protocol::Mode;
use std::path::Path;
use std::process::ExitCode;

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
}

pub async fn mcp(workspace: &Path, cmd: McpCmd) -> ExitCode {
    match cmd {
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
                Err(e) => fail(&e),
            }
        }
    }
}
