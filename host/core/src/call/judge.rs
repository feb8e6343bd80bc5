//! Step 4, `judge`: what the permission policy, the hooks' asks and the
//! exfiltration guard say about a call past its hooks and the protected
//! paths, each consulted once, in this order:
//!
//! 1. the policy, on the call as it will run and, when a hook rewrote it,
//!    on its original arguments too: the stricter verdict wins
//!    ([`crate::hooks::stricter`]), so a rewrite never widens what runs;
//! 2. a hook's ask turns an allow into an ask;
//! 3. the guard, unless the policy denied: a call that could send data out
//!    of a session holding sensitive content is asked, whatever the rule
//!    or mode said, and an approval for the session covers only calls the
//!    guard held ([`Scope::Guarded`]);
//! 4. the injection guard, unless the policy denied: a call with an effect
//!    (`write`, `network`, `execute`, or a sink) whose arguments carry a
//!    value that first appeared in untrusted content and nowhere the user
//!    wrote is asked, in every mode ([`crate::policy::hold_untrusted`]);
//!    only a person can let it through, and their approval lets those
//!    values pass for the rest of the session.

use super::hooks::Hooked;
use super::{Checked, Dispatcher, Scope, Target};
use crate::policy::{Decision, Verdict};

/// A call with its judgement.
pub(super) struct Judged {
    /// The call as it will run.
    pub checked: Checked,
    /// What the judges said.
    pub judgement: Judgement,
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
    /// The untrusted values its arguments carry (the injection guard held
    /// it): only a person may approve it, and their approval lets these
    /// pass for the rest of the session.
    pub tainted: Vec<String>,
}

impl Dispatcher {
    /// The policy, the hooks' ask and the guard on `hooked`, in the
    /// module's order.
    pub(super) fn judge(&self, hooked: Hooked) -> Judged {
        let Hooked {
            checked,
            original,
            ask,
        } = hooked;
        let judgement = self.judgement(&checked, original.as_ref(), &ask);
        Judged { checked, judgement }
    }

    fn judgement(
        &self,
        checked: &Checked,
        original: Option<&serde_json::Value>,
        ask: &[String],
    ) -> Judgement {
        let mut verdict = self.decide(checked, &checked.args);
        if let Some(original) = original {
            verdict = crate::hooks::stricter(verdict, self.decide(checked, original));
        }
        if !ask.is_empty() && verdict.decision == Decision::Allow {
            verdict = Verdict {
                decision: Decision::Ask,
                reason: format!("{}; but {}", verdict.reason, ask.join("; ")),
            };
        }
        let scope = Scope::of(&checked.call.name, &checked.args);
        let (guard, tainted) = match verdict.decision {
            Decision::Deny { .. } => (None, Vec::new()),
            _ => {
                let (taint, tainted) = self.taint_hold(checked);
                let guard = match (self.guard_hold(checked), taint) {
                    (Some(a), Some(b)) => Some(format!("{a}; {b}")),
                    (a, b) => a.or(b),
                };
                (guard, tainted)
            }
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
                tainted,
            },
            None => Judgement {
                verdict,
                scope,
                guard: None,
                also: None,
                hint: None,
                tainted,
            },
        }
    }

    /// Why the injection guard holds `checked`, and the values it holds it
    /// for: a call with an effect whose arguments carry values that first
    /// appeared in untrusted content.
    fn taint_hold(&self, checked: &Checked) -> (Option<String>, Vec<String>) {
        let Some(tracker) = self.tracker.as_ref() else {
            return (None, Vec::new());
        };
        let tool = &checked.call.name;
        if !tracker.settings.judges_injection(tool) || !self.has_effect(checked) {
            return (None, Vec::new());
        }
        let carried = tracker.carried(&checked.args);
        let why = crate::policy::hold_untrusted(tool, &carried);
        (why, carried.into_iter().map(|c| c.value).collect())
    }

    /// Whether `checked` changes or sends anything: it writes, reaches the
    /// network, runs programs, or is a sink; a host tool's own calls are
    /// judged where they run (a subagent's by its own dispatcher).
    fn has_effect(&self, checked: &Checked) -> bool {
        use crate::protocol::Effect;
        let sink = match &checked.target {
            Target::Plugin(plugin) => plugin.decl().sinks.contains(&checked.call.name),
            // A server that may send or write outside: its tools, whatever
            // they declare.
            Target::Mcp(tool) => {
                let workspace = self
                    .tracker
                    .as_ref()
                    .map(|t| t.classifier.workspace().to_path_buf())
                    .unwrap_or_default();
                tool.is_sink() || !tool.reach(&workspace).is_empty()
            }
            // `task`'s subagent's calls are judged by its own dispatcher;
            // a host tool that acts itself (`editor_write`) is judged here.
            Target::Host if checked.call.name == "task" => return false,
            Target::Host => false,
        };
        sink || checked
            .spec
            .effects
            .iter()
            .any(|e| matches!(e, Effect::Write | Effect::Network | Effect::Execute))
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
        let reach = match &checked.target {
            Target::Plugin(plugin) => {
                let mut reach = reach(
                    &checked.spec.effects,
                    plugin.decl(),
                    tracker.classifier.workspace(),
                );
                if plugin.decl().sinks.contains(&checked.call.name) {
                    reach.sinks.push(format!(
                        "`{}` (a sink in [plugins.{}])",
                        checked.call.name,
                        plugin.decl().name
                    ));
                }
                // An origin the call names may be approved beyond the grant.
                if let Some(dest) =
                    super::origin::destination(plugin.decl(), &checked.call.name, &checked.args)
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
            Target::Mcp(tool) => tool.reach(tracker.classifier.workspace()),
            Target::Host => return None,
        };
        let tool = &checked.call.name;
        tracker
            .with_held(|held| crate::policy::hold(&tracker.settings, held, tool, &reach))
            .or_else(|| {
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
