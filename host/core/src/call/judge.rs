//! Steps 2 and 4: what the hooks, the permission policy and the
//! exfiltration guard say about a call, each consulted once, in this order:
//!
//! 1. the `before_tool` hooks, before every other judge: they may block the
//!    call, ask for the user's approval, or rewrite its arguments (validated
//!    again, so the later steps judge the call as it will run);
//! 2. (the protected paths, [`super::protect`], on the call as it will run;)
//! 3. the policy, on the call as it will run and, when a hook rewrote it,
//!    on its original arguments too: the stricter verdict wins
//!    ([`crate::hooks::stricter`]), so a rewrite never widens what runs;
//! 4. a hook's ask turns an allow into an ask;
//! 5. the guard, unless the policy denied: a call that could send data out
//!    of a session holding sensitive content is asked, whatever the rule
//!    or mode said, and an approval for the session covers only calls the
//!    guard held ([`Scope::Guarded`]).

use super::{CallOutcome, Checked, Dispatcher, Scope, Sink};
use crate::policy::{Decision, Verdict};
use crate::protocol::{HookEvent, ToolCall};

/// What the `before_tool` hooks of a call left for the policy step.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Hooked {
    /// The original arguments, when a hook rewrote them (the call now
    /// carries the new ones).
    original: Option<serde_json::Value>,
    /// Hooks that asked for the user's approval, with their reasons.
    ask: Vec<String>,
}

/// The judges' verdict on one call, before anyone is asked.
pub(super) struct Judgement {
    /// Allow, deny, or ask, and why.
    pub verdict: Verdict,
    /// What an approval for the session would cover.
    pub scope: Scope,
    /// Why the guard holds the call, when it does.
    pub guard: Option<String>,
    /// A second scope the call asks about and an approval for the session
    /// also covers: the origin of its destination ([`super::egress`]).
    pub also: Option<Scope>,
    /// How to allow the call without asking, added to its refusal.
    pub hint: Option<String>,
}

impl Dispatcher {
    /// The `before_tool` hooks of `checked`: a rewrite replaces it with the
    /// call on the new arguments, validated again. `Err` is the refusal
    /// when a hook blocked (or failed) or the new arguments are invalid.
    pub(super) async fn before_tool_hooks(
        &self,
        checked: &mut Checked,
        sink: &mut dyn Sink,
    ) -> anyhow::Result<Result<Hooked, CallOutcome>> {
        if !self.hooks.has(HookEvent::BeforeTool) {
            return Ok(Ok(Hooked::default()));
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
                Ok(rewritten) => original = Some(std::mem::replace(checked, rewritten).args),
                Err(invalid) => {
                    let (why, ..) = invalid.into_parts();
                    return Ok(Err(refused(format!(
                        "blocked: a before_tool hook rewrote the arguments into a call that cannot run: {why}"
                    ))));
                }
            }
        }
        Ok(Ok(Hooked {
            original,
            ask: outcome.ask,
        }))
    }

    /// Steps 3–5 of the module's order: the policy, the hooks' ask, the guard.
    pub(super) fn judge(&self, checked: &Checked, hooked: &Hooked) -> Judgement {
        let mut verdict = self.decide(checked, &checked.args);
        if let Some(original) = &hooked.original {
            verdict = crate::hooks::stricter(verdict, self.decide(checked, original));
        }
        if !hooked.ask.is_empty() && verdict.decision == Decision::Allow {
            verdict = Verdict {
                decision: Decision::Ask,
                reason: format!("{}; but {}", verdict.reason, hooked.ask.join("; ")),
            };
        }
        let scope = Scope::of(&checked.call.name, &checked.args);
        let guard = match verdict.decision {
            Decision::Deny { .. } => None,
            _ => self.guard_hold(checked),
        };
        match guard {
            Some(why) => Judgement {
                verdict: Verdict {
                    decision: Decision::Ask,
                    reason: format!("{why} (the policy alone: {})", verdict.reason),
                },
                scope: Scope::Guarded(Box::new(scope)),
                guard: Some(why),
                also: None,
                hint: None,
            },
            None => Judgement {
                verdict,
                scope,
                guard: None,
                also: None,
                hint: None,
            },
        }
    }

    /// The policy's verdict on `checked` with `args`, every path it names
    /// judged both as written and as it resolves beneath the workspace.
    fn decide(&self, checked: &Checked, args: &serde_json::Value) -> Verdict {
        let resolve = |p: &str| self.resolve(p);
        let resolve: Option<&dyn Fn(&str) -> String> =
            self.workspace.as_ref().map(|_| &resolve as _);
        self.policy
            .decide_at(&checked.call.name, &checked.spec.effects, args, resolve)
    }

    /// Why the exfiltration guard holds `checked`, if it does: the session
    /// holds sensitive content and the call could send data out (network,
    /// a program with the network, a write outside the workspace), or the
    /// call's own arguments name a secret file and it could reach the
    /// network; judged by its declared effects and its plugin's grants.
    fn guard_hold(&self, checked: &Checked) -> Option<String> {
        let tracker = self.tracker.as_ref()?;
        if !tracker.settings.enabled {
            return None;
        }
        // A host tool sends nothing itself; a subagent's calls are judged by
        // its own dispatcher, which shares this tracker.
        let reach = match (&checked.plugin, &checked.mcp) {
            (Some(plugin), _) => {
                let mut reach = reach(
                    &checked.spec.effects,
                    plugin.decl(),
                    tracker.classifier.workspace(),
                );
                // An origin the call names may be approved beyond the grant.
                if let Some(dest) = super::egress::destination(checked)
                    && checked
                        .spec
                        .effects
                        .contains(&crate::protocol::Effect::Network)
                    && !reach.hosts.contains(&dest)
                {
                    reach.hosts.push(dest);
                }
                reach
            }
            (None, Some(mcp)) => mcp
                .get(&checked.call.name)?
                .reach(tracker.classifier.workspace()),
            (None, None) => return None,
        };
        let tool = &checked.call.name;
        crate::policy::hold(&tracker.settings, &tracker.held(), tool, &reach).or_else(|| {
            let named = tracker.classifier.secret_args(&checked.args);
            crate::policy::hold_named(&tracker.settings, &named, tool, &reach)
        })
    }
}

/// Where a call with `effects` of the plugin `decl` could send data, by the
/// grants its sandbox gets.
fn reach(
    effects: &[crate::protocol::Effect],
    decl: &crate::manifest::PluginDecl,
    workspace: &std::path::Path,
) -> crate::policy::Reach {
    let net = decl
        .net
        .iter()
        .map(|g| format!("{}:{}", g.host, g.port))
        .collect();
    let programs = decl
        .exec
        .iter()
        .map(|g| (g.program.clone(), g.network.reaches()))
        .collect();
    let outside = decl
        .fs
        .iter()
        .filter(|g| g.access == crate::manifest::Access::Rw && !g.host_path.starts_with(workspace))
        .map(|g| g.host_path.display().to_string())
        .collect();
    crate::policy::Reach::of(effects, net, programs, outside)
}
