//! The one load sequence of a workspace: its manifest, a runtime, the
//! plugins the manifest names, and the hooks bound to them. Sessions, the
//! MCP server and the CLI's commands all load through here, so a change to
//! the order (or to what is checked on the way) is made once.

use crate::hooks::Hooks;
use crate::manifest::Manifest;
use crate::runtime::{Plugins, Runtime, RuntimeOptions};
use std::path::Path;
use std::sync::Arc;

/// Why a workspace could not be loaded, by the step that failed: a caller
/// can tell a manifest the user must edit from a plugin that does not
/// compile. Its text is the message for the user.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The manifest (a layer of it, a profile, an override) is wrong; the
    /// text names the file and line.
    #[error(transparent)]
    Manifest(#[from] crate::manifest::ManifestError),
    /// No runtime could be made (the engine, its cache).
    #[error("{0}")]
    Runtime(String),
    /// A plugin the manifest names could not be loaded.
    #[error(transparent)]
    Plugins(#[from] crate::runtime::LoadError),
    /// A `[hooks]` binding names a plugin that is not loaded or not a
    /// hook.
    #[error(transparent)]
    Hooks(#[from] crate::hooks::BindError),
    /// The exfiltration guard's settings (`[guard]`) do not compile.
    #[error(transparent)]
    Guard(#[from] crate::policy::GlobsError),
}

impl From<LoadError> for String {
    fn from(e: LoadError) -> Self {
        e.to_string()
    }
}

/// A workspace's manifest with its plugins loaded.
pub struct Loaded {
    /// The manifest the plugins were loaded from.
    pub manifest: Manifest,
    /// The runtime that loaded them (shared by sub-agents).
    pub runtime: Arc<Runtime>,
    /// The loaded plugins.
    pub plugins: Arc<Plugins>,
}

impl std::fmt::Debug for Loaded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loaded")
            .field("workspace", &self.manifest.workspace)
            .finish_non_exhaustive()
    }
}

/// The manifest of `workspace`, or `given` when the caller has one
/// already.
pub fn manifest(workspace: &Path, given: Option<Manifest>) -> Result<Manifest, LoadError> {
    match given {
        Some(m) => Ok(m),
        None => Ok(crate::manifest::load(workspace)?),
    }
}

/// Loads the plugins of `manifest` in a new runtime (`options`, default
/// [`RuntimeOptions::user`]).
pub async fn plugins(
    manifest: Manifest,
    options: Option<RuntimeOptions>,
) -> Result<Loaded, LoadError> {
    let runtime = Runtime::new(options.unwrap_or_else(RuntimeOptions::user))
        .map(Arc::new)
        .map_err(|e| LoadError::Runtime(format!("{e:#}")))?;
    let plugins = Arc::new(runtime.load(&manifest).await?);
    Ok(Loaded {
        manifest,
        runtime,
        plugins,
    })
}

/// [`manifest`], then [`plugins`].
pub async fn load(
    workspace: &Path,
    given: Option<Manifest>,
    options: Option<RuntimeOptions>,
) -> Result<Loaded, LoadError> {
    plugins(manifest(workspace, given)?, options).await
}

impl Loaded {
    /// The manifest's `[hooks]` bound to the loaded plugins: the last step,
    /// taken by those that run tool calls (a listing does not need it).
    pub async fn hooks(&self) -> Result<Hooks, LoadError> {
        Ok(Hooks::new(&self.manifest.hooks, &self.plugins).await?)
    }

    /// What a front-end without a session (the MCP server, `corral tool
    /// call`) builds its call pipeline from: the manifest's policy (in
    /// `mode`, when given), its hooks, the exfiltration guard over the
    /// workspace, the MCP servers' tools `mcp`, and `approver`; no output
    /// limit (the plugin's own `limits.output_kb` bounds what comes back,
    /// and there is no session log to keep a cut output in).
    pub async fn front(
        &self,
        approver: Arc<dyn crate::call::Approver>,
        mcp: Arc<crate::mcp_client::McpTools>,
        mode: Option<crate::protocol::Mode>,
    ) -> Result<crate::call::Front, LoadError> {
        let hooks = self.hooks().await?;
        let mut policy = self.manifest.policy.clone();
        if let Some(mode) = mode {
            policy.mode = mode;
        }
        let workspace = std::fs::canonicalize(&self.manifest.workspace)
            .unwrap_or(self.manifest.workspace.clone());
        let tracker = crate::provenance::Tracker::new(
            &workspace,
            self.manifest.guard.clone(),
            Default::default(),
        )?;
        Ok(crate::call::Front {
            plugins: self.plugins.clone(),
            policy,
            approver,
            output_limit: None,
            hooks: Arc::new(hooks),
            mcp,
            tracker: Some(Arc::new(tracker)),
            host_tools: Vec::new(),
        })
    }
}
