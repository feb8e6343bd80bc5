//! Step 2, `hooks`: the `before_tool` hooks, before every judge. They may
//! block the call, ask for the user's approval, or rewrite its arguments:
//! the rewritten call is checked again (step 1's rules), so every later
//! step judges the call as it will run, and its original arguments go on
//! beside it for the policy (step 4).

use super::{CallOutcome, Checked, Dispatcher, Sink};
use crate::protocol::{HookEvent, ToolCall};

/// A call past its `before_tool` hooks.
#[derive(Clone)]
pub(super) struct Hooked {
    /// The call as it will run (rewritten, when a hook rewrote it).
    pub checked: Checked,
    /// The original arguments, when a hook rewrote them.
    pub original: Option<serde_json::Value>,
    /// Hooks that asked for the user's approval, with their reasons.
    pub ask: Vec<String>,
}

impl Dispatcher {
    /// The `before_tool` hooks of `checked`: a rewrite replaces it with the
    /// call on the new arguments, checked again. `Err` is the refusal when
    /// a hook blocked (or failed) or the new arguments are invalid.
    pub(super) async fn before_tool(
        &self,
        mut checked: Checked,
        sink: &mut dyn Sink,
    ) -> anyhow::Result<Result<Hooked, CallOutcome>> {
        if !self.hooks.has(HookEvent::BeforeTool) {
            return Ok(Ok(Hooked {
                checked,
                original: None,
                ask: Vec::new(),
            }));
        }
        let input = crate::protocol::HookInput::BeforeTool {
            call: checked.call.clone(),
            effects: checked.spec.effects.clone(),
        };
        let outcome = self.hooks.run(input, sink).await?;
        let refused = |message: String| CallOutcome::Refused {
            message,
            stop: false,
        };
        if let Some(why) = outcome.blocked {
            return Ok(Err(refused(why)));
        }
        let mut original = None;
        if let Some(arguments) = outcome.rewrite {
            let call = ToolCall {
                arguments,
                ..checked.call.clone()
            };
            match self.check(&call, None) {
                Ok(rewritten) => original = Some(std::mem::replace(&mut checked, rewritten).args),
                Err(invalid) => {
                    let (why, ..) = invalid.into_parts();
                    return Ok(Err(refused(format!(
                        "blocked: a before_tool hook rewrote the arguments into a call that cannot run: {why}"
                    ))));
                }
            }
        }
        Ok(Ok(Hooked {
            checked,
            original,
            ask: outcome.ask,
        }))
    }
}
