//! Hook plugins (`corral:plugin/hook`): the conversions between
//! the hooks' events and decisions and the WIT types, and the call of
//! `handle` in a fresh sandbox under the plugin's own grants and limits.

use super::bindings::{hook as wit, types as wit_types};
use super::budget;
use super::effects::CallCaps;
use super::error::ToolError;
use super::plugin::Plugin;
use super::sandbox::{Extras, PluginKind};
use crate::protocol::Effect;
use crate::protocol::{HookInput, Verdict};

fn effect(e: Effect) -> wit_types::Effect {
    match e {
        Effect::Read => wit_types::Effect::Read,
        Effect::Write => wit_types::Effect::Write,
        Effect::Execute => wit_types::Effect::Execute,
        Effect::Network => wit_types::Effect::Network,
    }
}

fn to_wit(input: &HookInput) -> wit::Event {
    use wit::Event as E;
    match input {
        HookInput::SessionStart {
            session_id,
            resumed,
        } => E::SessionStart(wit::SessionStart {
            session_id: session_id.clone(),
            source: if *resumed {
                wit::SessionSource::Resume
            } else {
                wit::SessionSource::Startup
            },
        }),
        HookInput::SessionEnd { session_id } => E::SessionEnd(wit::SessionEnd {
            session_id: session_id.clone(),
        }),
        HookInput::UserPrompt { text } => E::UserPrompt(wit::UserPrompt { text: text.clone() }),
        HookInput::BeforeTool { call, effects } => E::BeforeTool(wit::BeforeTool {
            call: call.into(),
            effects: effects.iter().copied().map(effect).collect(),
        }),
        HookInput::AfterTool {
            call,
            content,
            is_error,
        } => E::AfterTool(wit::AfterTool {
            call: call.into(),
            content: content.clone(),
            is_error: *is_error,
        }),
        HookInput::AfterToolFailure { call, error } => E::AfterToolFailure(wit::AfterToolFailure {
            call: call.into(),
            error: error.clone(),
        }),
        HookInput::BeforeCompact { manual, messages } => E::BeforeCompact(wit::BeforeCompact {
            trigger: if *manual {
                wit::CompactTrigger::Manual
            } else {
                wit::CompactTrigger::Auto
            },
            messages: *messages,
        }),
        HookInput::Stop { text } => E::Stop(wit::Stop { text: text.clone() }),
        HookInput::SubagentStop { task, text } => E::SubagentStop(wit::SubagentStop {
            task: task.clone(),
            text: text.clone(),
        }),
    }
}

impl Plugin {
    /// Whether it is a hook plugin (exports `corral:plugin/hook`). Compiles
    /// it when it was loaded from the description cache.
    pub async fn is_hook(&self) -> bool {
        matches!(self.kind().await, Ok(PluginKind::Hook(_)))
    }

    /// Runs this hook plugin's `handle` for one event in a fresh sandbox
    /// with its own grants and limits (an instance made ahead when one is
    /// ready, see [`Plugin::make_ahead`]). A trap, a timeout or a limit is a
    /// [`ToolError::Sandbox`]; the decision's text is cut to the plugin's
    /// output limit.
    pub async fn handle_hook(&self, input: &HookInput) -> Result<Verdict, ToolError> {
        let PluginKind::Hook(pre) = self.kind().await.map_err(|e| ToolError::Sandbox(e.0))? else {
            return Err(ToolError::Failed(format!(
                "plugin `{}` is not a hook plugin: it does not export corral:plugin/hook@0.1.0",
                self.decl.name
            )));
        };
        let event = to_wit(input);
        let decision = self
            .sandbox()
            .call(
                pre,
                CallCaps::Hook,
                Extras {
                    ahead: Some(&self.ready_hook),
                    ..Extras::default()
                },
                |instance, store| {
                    Box::pin(async move {
                        instance
                            .corral_plugin_hook()
                            .call_handle(store, &event)
                            .await
                    })
                },
            )
            .await?;
        let cap = self.decl.limits.output_kb.saturating_mul(1024);
        let cut = |m: String| budget::cap_text(m, cap, "hook text");
        Ok(match decision {
            wit::Decision::Continue => Verdict::Continue,
            wit::Decision::Block(r) => Verdict::Block(cut(r)),
            wit::Decision::Ask(r) => Verdict::Ask(cut(r)),
            wit::Decision::AddContext(c) => Verdict::AddContext(cut(c)),
            wit::Decision::Rewrite(a) => Verdict::Rewrite(cut(a)),
        })
    }
}
