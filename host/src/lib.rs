//! # corral
//!
//! A coding agent for the terminal whose tools and LLM provider adapters are
//! WebAssembly components. This crate is the native host: it reads the
//! manifest ([`manifest`]), loads plugins into wasmtime sandboxes that grant
//! each only what its manifest entry names ([`runtime`]), runs the agent
//! loop ([`agent`]) and keeps the session log ([`log`]). Front-ends open a
//! session with [`session::open`], submit [`protocol::Op`]s and render
//! [`protocol::Event`]s; the library never prints.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! let manifest = corral::manifest::load(std::path::Path::new("."))?;
//! let runtime = corral::runtime::Runtime::new(corral::runtime::RuntimeOptions::user())?;
//! let plugins = runtime.load(&manifest).await?;
//! let out = plugins.call("read_file", r#"{"path":"README.md"}"#, "call-1").await?;
//! assert!(!out.content.is_empty());
//! # Ok(()) }
//! ```
#![deny(clippy::print_stdout, clippy::print_stderr)]
#![warn(missing_docs)]

pub mod agent;
pub mod call;
pub mod context;
pub mod exec;
pub mod fsread;
pub mod hooks;
pub mod install;
pub mod log;
pub mod manifest;
pub mod mcp;
pub mod policy;
pub mod protocol;
pub mod provenance;
pub mod runtime;
mod schema;
pub mod session;
pub mod terminal;
pub mod tui;
pub mod worktree;
pub use manifest::trust;
