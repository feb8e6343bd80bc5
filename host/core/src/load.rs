//! The one load sequence of a workspace: its manifest, a runtime, the
//! plugins the manifest names, and the hooks bound to them. Sessions, the
//! MCP server and the CLI's commands all load through here, so a change to
//! the order (or to what is checked on the way) is made once.

use crate::hooks::Hooks;
use crate::manifest::Manifest;
use crate::runtime::{Plugins, Runtime, RuntimeOptions};
use std::path::Path;
use std::sync::Arc;

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
/// already. The error is a message for the user.
pub fn manifest(workspace: &Path, given: Option<Manifest>) -> Result<Manifest, String> {
    match given {
        Some(m) => Ok(m),
        None => crate::manifest::load(workspace).map_err(|e| e.to_string()),
    }
}

/// Loads the plugins of `manifest` in a new runtime (`options`, default
/// [`RuntimeOptions::user`]).
pub async fn plugins(
    manifest: Manifest,
    options: Option<RuntimeOptions>,
) -> Result<Loaded, String> {
    let runtime = Runtime::new(options.unwrap_or_else(RuntimeOptions::user))
        .map(Arc::new)
        .map_err(|e| format!("{e:#}"))?;
    let plugins = Arc::new(runtime.load(&manifest).await.map_err(|e| e.to_string())?);
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
) -> Result<Loaded, String> {
    plugins(manifest(workspace, given)?, options).await
}

impl Loaded {
    /// The manifest's `[hooks]` bound to the loaded plugins: the last step,
    /// taken by those that run tool calls (a listing does not need it).
    pub async fn hooks(&self) -> Result<Hooks, String> {
        Hooks::new(&self.manifest.hooks, &self.plugins).await
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
    ) -> Result<crate::call::Front, String> {
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
