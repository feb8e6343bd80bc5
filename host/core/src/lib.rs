//! # corral-core
//!
//! The agent of corral, below every front-end: the one load sequence
//! ([`load`]: manifest → runtime → plugins → hooks), the tool-call types
//! ([`call`]), the agent loop ([`agent`]), sessions ([`session`]) and their
//! log ([`log`]), the model's context ([`context`]), hooks ([`hooks`]),
//! the exfiltration guard's provenance tracking ([`provenance`]), git
//! worktrees ([`worktree`]) and plugin installs ([`install`]).
//!
//! Front-ends (the terminal UI, the MCP server, the CLI) depend on this
//! crate and on `corral-protocol` only: they open a session with
//! [`session::open`], submit `Op`s and render `Event`s; the library never
//! prints. What they need of the lower crates is exported here: the
//! manifest they show and edit ([`manifest`]), and for the plugin commands
//! a curated part of the runtime ([`plugins`]).
//!
//! ```no_run
//! # async fn demo() -> Result<(), String> {
//! let loaded = corral_core::load::load(std::path::Path::new("."), None, None).await?;
//! let out = loaded
//!     .plugins
//!     .call("read_file", r#"{"path":"README.md"}"#, "call-1")
//!     .await
//!     .map_err(|e| e.to_string())?;
//! assert!(!out.content.is_empty());
//! # Ok(()) }
//! ```
#![deny(clippy::print_stdout, clippy::print_stderr)]
#![warn(missing_docs)]

// The lower crates under the names the modules of this crate were written
// with (`crate::runtime::…`), so that each layer reads the same.
use corral_exec as exec;
use corral_exec::fsread;
use corral_manifest::trust;
use corral_policy as policy;
use corral_protocol as protocol;
use corral_protocol::terminal;
use corral_runtime as runtime;

/// The manifest (`corral-manifest`), which front-ends show, edit and trust.
pub use corral_manifest as manifest;

pub mod agent;
pub mod call;
pub mod checkpoint;
pub mod commands;
pub mod context;
pub mod editor;
pub mod hooks;
pub mod install;
pub mod load;
pub mod log;
pub mod mcp_client;
pub mod plugins;
pub mod provenance;
mod schema;
pub mod session;
pub mod skills;

pub use schema::{AnswerMismatch, AnswerSchema, BadSchema};
pub mod words;
pub mod worktree;

/// What front-ends need of the confined path for native programs
/// (`corral-exec`).
pub mod native {
    pub use corral_exec::fsread::read_regular;
    pub use corral_exec::{adopt_orphans, git, resolve};
}
