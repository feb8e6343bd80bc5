//! A loaded plugin ([`Plugin`]), what kind it is ([`PluginKind`]), and its
//! tool calls: `describe`, `invoke` and `preview`, with what they return
//! ([`ToolOutput`], [`ToolError`]). A provider's calls are in `provider`.

use super::bindings::{tool as wit, types};
use super::cache::CacheOutcome;
use super::compiler::{Code, Compiler};
use super::error::{LoadError, ToolError};
use super::sandbox::{Extras, PluginKind, Ready, Sandbox};
use super::store::PluginShared;
use super::{budget, effects};
use crate::manifest::PluginDecl;
use crate::protocol::{Effect, ToolSpec};
use std::sync::Arc;
use wasmtime::Engine;

/// What a successful call returns.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ToolOutput {
    /// Text for the model.
    pub content: String,
    /// The tool reports a failure in `content`.
    pub is_error: bool,
    /// Structured data, if the tool gave any.
    pub data: Option<serde_json::Value>,
}

impl From<wit::ToolError> for ToolError {
    fn from(e: wit::ToolError) -> Self {
        match e {
            wit::ToolError::InvalidArguments(m) => ToolError::InvalidArguments(m),
            wit::ToolError::UnknownTool(m) => ToolError::UnknownTool(m),
            wit::ToolError::Failed(m) => ToolError::Failed(m),
            wit::ToolError::Fatal(m) => ToolError::Fatal(m),
        }
    }
}

/// A tool list a provider was last asked with, and what it became in the
/// plugin's types ([`Plugin::complete`]).
pub(super) struct Offered {
    /// The list, as the agent offered it.
    pub(super) list: Arc<[ToolSpec]>,
    /// The same list, converted.
    pub(super) wit: Vec<super::bindings::types::ToolSpec>,
}

/// A loaded plugin, ready to be called.
///
/// Its component was read and its hash checked against the manifest's pin
/// and the project's trust record when it loaded. Its code may not be
/// compiled yet: a plugin whose tools came from the description cache is
/// compiled (or loaded from the compile cache), linked and instantiated on
/// its first call, so a command pays only for the plugins it uses.
pub struct Plugin {
    pub(super) engine: Engine,
    pub(super) shared: Arc<PluginShared>,
    pub(super) decl: PluginDecl,
    pub(super) sha256: String,
    pub(super) imports: Vec<String>,
    /// Whether it exports `corral:plugin/provider` (known before it is compiled).
    pub(super) provider: bool,
    pub(super) tools: Vec<ToolSpec>,
    /// Its code, once compiled.
    pub(super) code: tokio::sync::OnceCell<Code>,
    /// How to compile it on its first call; `None` when `code` is set from
    /// the start.
    pub(super) compiler: Option<Arc<Compiler>>,
    /// A provider's last tool list, with what it became in the plugin's
    /// types ([`Plugin::complete`]).
    pub(super) offered: std::sync::Mutex<Option<Offered>>,
    /// The instance made for its next tool call ([`Plugin::make_ahead`]).
    pub(super) ready: Arc<Ready<super::bindings::ToolPlugin>>,
    /// A hook plugin's instance made for the next event it handles.
    pub(super) ready_hook: Arc<Ready<super::bindings::HookPlugin>>,
}

impl Plugin {
    /// The sandbox its calls run in.
    pub(super) fn sandbox(&self) -> Sandbox<'_> {
        Sandbox {
            engine: &self.engine,
            plugin: &self.shared,
            decl: &self.decl,
        }
    }

    /// Its code: compiled on the first call that needs it (once, however
    /// many calls ask at the same time).
    pub(super) async fn kind(&self) -> Result<&PluginKind, LoadError> {
        let code = self
            .code
            .get_or_try_init(|| async {
                let compiler = self.compiler.as_ref().ok_or_else(|| {
                    LoadError(format!("plugin `{}` has no code to run", self.decl.name))
                })?;
                let started = std::time::Instant::now();
                let compiled = compiler.compile(&self.decl, &self.sha256, None)?;
                // The cached description was stored for this very component
                // (its hash is in the key); a disagreement means the cache
                // entry is not what it claims to be.
                if compiled.imports != self.imports
                    || compiled.code.kind.is_provider() != self.provider
                {
                    return Err(LoadError(format!(
                        "plugin `{}`: its cached description does not match its component; \
                         run `corral plugin cache --clear` and try again",
                        self.decl.name
                    )));
                }
                tracing::debug!(
                    plugin = %self.decl.name,
                    "ready for its first call ({:.1?})",
                    started.elapsed()
                );
                Ok::<Code, LoadError>(compiled.code)
            })
            .await?;
        Ok(&code.kind)
    }

    /// Whether an instance made ahead waits for its next tool call, or a
    /// hook plugin's for the next event it handles (see
    /// [`Plugin::make_ahead`]).
    pub fn ready_ahead(&self) -> bool {
        self.ready.is_ready() || self.ready_hook.is_ready()
    }

    /// Makes the instance its next tool call will run in (a hook plugin:
    /// the next event it handles), on a task of its own, if its code is
    /// loaded (it was called in this process, or it was loaded to list its
    /// tools and their description could not be cached),
    /// none is ready or being made, and a slot of the pool is free for it.
    /// For the moments the host is idle (a session waiting for the model):
    /// the call that comes next starts running the plugin's code at once.
    /// Each instance still serves one call; one whose making called the
    /// host is not kept. Must be called within a tokio runtime.
    pub fn make_ahead(&self) {
        match self.code.get().map(|c| &c.kind) {
            Some(PluginKind::Tool(pre)) => self.sandbox().make_ahead(pre, &self.ready),
            Some(PluginKind::Hook(pre)) => self.sandbox().make_ahead(pre, &self.ready_hook),
            Some(PluginKind::Provider(_)) | None => {}
        }
    }

    /// Its manifest entry.
    pub fn decl(&self) -> &PluginDecl {
        &self.decl
    }

    /// SHA-256 of its component.
    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    /// The interfaces it imports.
    pub fn imports(&self) -> &[String] {
        &self.imports
    }

    /// Each interface it imports, and whether its grants make it live or
    /// leave it linked to a stub that denies every call.
    pub fn import_reviews(&self) -> Vec<super::ImportReview> {
        self.imports
            .iter()
            .map(|i| super::imports::review(&self.decl, i))
            .collect()
    }

    /// Whether it was compiled now or loaded from the compile cache; `None`
    /// while it has not been needed (its tools came from the description
    /// cache and it has not been called).
    pub fn cache_outcome(&self) -> Option<CacheOutcome> {
        self.code.get().map(|c| c.outcome)
    }

    /// Its tools (none for a provider plugin).
    pub fn tools(&self) -> &[ToolSpec] {
        &self.tools
    }

    /// Whether it is a provider plugin (exports `corral:plugin/provider`).
    pub fn is_provider(&self) -> bool {
        self.provider
    }

    /// Asks the plugin for its tools, in a sandbox with no programs, no
    /// network and read-only directories, and vets what it answers. Also
    /// tells whether the answer may be cached: not when the plugin looked at
    /// its directories while describing itself, since then its tools may
    /// follow files that change.
    pub(super) async fn describe(&self) -> Result<(Vec<ToolSpec>, bool), LoadError> {
        let name = &self.decl.name;
        let kind = self.kind().await?;
        let PluginKind::Tool(pre) = kind else {
            return Ok((Vec::new(), true));
        };
        let (specs, touched_files) = self
            .sandbox()
            .call(
                pre,
                effects::CallCaps::Describe,
                Extras::default(),
                move |instance, store| {
                    Box::pin(async move {
                        let specs = instance
                            .corral_plugin_tool()
                            .call_describe(&mut *store)
                            .await?;
                        Ok((specs, store.data().touched_files()))
                    })
                },
            )
            .await
            .map_err(|e| LoadError(format!("plugin `{name}`: `describe` failed: {e}")))?;
        let mut tools = Vec::new();
        for spec in specs {
            let schema: serde_json::Value =
                serde_json::from_str(&spec.input_schema).map_err(|e| {
                    LoadError(format!(
                        "plugin `{name}`: tool `{}` has an input schema that is not JSON: {e}",
                        spec.name
                    ))
                })?;
            tools.push(ToolSpec {
                name: format!("{}{}", self.decl.tool_prefix, spec.name),
                description: spec.description,
                input_schema: schema,
                effects: spec
                    .effects
                    .into_iter()
                    .map(|e| match e {
                        types::Effect::Read => Effect::Read,
                        types::Effect::Write => Effect::Write,
                        types::Effect::Execute => Effect::Execute,
                        types::Effect::Network => Effect::Network,
                    })
                    .collect(),
                warnings: Vec::new(),
            });
        }
        budget::vet_tools(
            name,
            &self.decl.origin.to_string(),
            &mut tools,
            self.decl.limits.output_kb,
        )?;
        if touched_files {
            tracing::debug!(
                plugin = %name,
                "its tools are not cached: it looked at its directories while describing itself"
            );
        }
        Ok((tools, !touched_files))
    }

    /// The name the plugin itself gave `tool`, without the entry's `tool_prefix`.
    fn own_name<'a>(&self, tool: &'a str) -> &'a str {
        tool.strip_prefix(self.decl.tool_prefix.as_str())
            .unwrap_or(tool)
    }

    /// Runs one call of `tool` with JSON `arguments` in a fresh sandbox.
    pub async fn call(
        &self,
        tool: &str,
        arguments: &str,
        call_id: &str,
    ) -> Result<ToolOutput, ToolError> {
        self.call_touched(tool, arguments, call_id, Vec::new())
            .await
            .0
    }

    /// [`Plugin::call`], and what the call touched (files read, hosts
    /// reached, programs run), whatever its outcome. `widened` are origins
    /// the user approved for this one call beyond the plugin's `grants.net`.
    pub async fn call_touched(
        &self,
        tool: &str,
        arguments: &str,
        call_id: &str,
        widened: Vec<crate::manifest::NetGrant>,
    ) -> (Result<ToolOutput, ToolError>, super::Touched) {
        let mut touched = super::Touched::default();
        let result = self
            .call_recording(tool, arguments, call_id, widened, &mut touched)
            .await;
        (result, touched)
    }

    async fn call_recording(
        &self,
        tool: &str,
        arguments: &str,
        call_id: &str,
        widened: Vec<crate::manifest::NetGrant>,
        touched: &mut super::Touched,
    ) -> Result<ToolOutput, ToolError> {
        let spec = self
            .tools
            .iter()
            .find(|t| t.name == tool)
            .ok_or_else(|| ToolError::UnknownTool(tool.to_owned()))?;
        let call = wit::ToolCall {
            id: call_id.to_owned(),
            name: self.own_name(tool).to_owned(),
            arguments: arguments.to_owned(),
        };
        let output_cap = self.decl.limits.output_kb.saturating_mul(1024);
        tracing::debug!(plugin = %self.decl.name, tool, "call started");
        let PluginKind::Tool(pre) = self.kind().await.map_err(|e| ToolError::Sandbox(e.0))? else {
            return Err(ToolError::UnknownTool(tool.to_owned()));
        };
        // The same declared effects the permission policy judged this call by.
        let caps = effects::CallCaps::Invoke {
            tool: tool.to_owned(),
            effects: spec.effects.clone(),
            widened,
        };
        let result = self
            .sandbox()
            .call(
                pre,
                caps,
                Extras {
                    ahead: Some(&self.ready),
                    touched: Some(touched),
                    ..Extras::default()
                },
                move |instance, store| {
                    Box::pin(async move {
                        instance
                            .corral_plugin_tool()
                            .call_invoke(store, &call)
                            .await
                    })
                },
            )
            .await?;
        match result {
            Ok(out) => {
                let size = out.content.len() + out.data.as_ref().map_or(0, String::len);
                if size as u64 > output_cap {
                    return Err(ToolError::Sandbox(format!(
                        "plugin `{}`: the output of `{tool}` ({size} bytes) exceeds the limit of {} KiB; \
                         ask for less output or raise limits.output_kb",
                        self.decl.name, self.decl.limits.output_kb
                    )));
                }
                let data = match out.data {
                    Some(d) => Some(serde_json::from_str(&d).map_err(|e| {
                        ToolError::Failed(format!("`{tool}` returned data that is not JSON: {e}"))
                    })?),
                    None => None,
                };
                Ok(ToolOutput {
                    content: out.content,
                    is_error: out.is_error,
                    data,
                })
            }
            Err(e) => Err(self.capped(e.into())),
        }
    }

    /// The unified diff `tool` would apply with these arguments, computed by
    /// the plugin before anything is approved: with its directories mounted
    /// read-only, no programs and no network, so a preview can change nothing
    /// and send nothing anywhere. `None` when the tool changes no file or
    /// cannot tell.
    pub async fn preview(
        &self,
        tool: &str,
        arguments: &str,
        call_id: &str,
    ) -> Result<Option<String>, ToolError> {
        let PluginKind::Tool(pre) = self.kind().await.map_err(|e| ToolError::Sandbox(e.0))? else {
            return Err(ToolError::UnknownTool(tool.to_owned()));
        };
        let call = wit::ToolCall {
            id: call_id.to_owned(),
            name: self.own_name(tool).to_owned(),
            arguments: arguments.to_owned(),
        };
        let caps = effects::CallCaps::Preview {
            tool: tool.to_owned(),
        };
        let result = self
            .sandbox()
            .call(pre, caps, Extras::default(), move |instance, store| {
                Box::pin(async move {
                    instance
                        .corral_plugin_tool()
                        .call_preview(store, &call)
                        .await
                })
            })
            .await?;
        match result {
            Ok(Some(diff))
                if diff.len() as u64 > self.decl.limits.output_kb.saturating_mul(1024) =>
            {
                Err(ToolError::Sandbox(format!(
                    "plugin `{}`: the preview of `{tool}` ({} bytes) exceeds the limit of {} KiB; \
                     raise limits.output_kb to review such a change",
                    self.decl.name,
                    diff.len(),
                    self.decl.limits.output_kb
                )))
            }
            Ok(preview) => Ok(preview),
            Err(e) => Err(self.capped(e.into())),
        }
    }

    /// `err` with its text cut to the output limit: error text reaches the
    /// terminal, the model and the session log like output does.
    fn capped(&self, err: ToolError) -> ToolError {
        let cap = self.decl.limits.output_kb.saturating_mul(1024);
        let cut = |m: String| budget::cap_text(m, cap, "error text");
        match err {
            ToolError::UnknownTool(m) => ToolError::UnknownTool(cut(m)),
            ToolError::InvalidArguments(m) => ToolError::InvalidArguments(cut(m)),
            ToolError::Failed(m) => ToolError::Failed(cut(m)),
            ToolError::Fatal(m) => ToolError::Fatal(cut(m)),
            ToolError::Sandbox(m) => ToolError::Sandbox(cut(m)),
        }
    }
}
