//! Hooks: plugins that run at points of a session's life and answer with a
//! typed decision.
//!
//! A hook is a WASM component exporting `corral:plugin/hook` (one `handle`
//! function over a variant of events), declared in `[plugins.NAME]` like any
//! plugin: pinned, trusted with its project, and granted nothing unless its
//! entry says so. The manifest's `[hooks]` table binds plugins to events,
//! with tool-name matchers for tool events. [`Hooks`] runs the bound
//! plugins of an event in order, each in a fresh sandbox under its own
//! limits, logs every decision as an [`Event::Hook`], and folds the answers
//! into one [`Outcome`]:
//!
//! - a `block` stops the hooks after it and refuses what the event guards;
//! - `add-context` texts are collected in order;
//! - a `rewrite` (before a tool call only) is seen by the hooks after it;
//! - a hook that traps, times out, hits a limit or answers a decision its
//!   event cannot carry out is reported; for a blocking event
//!   ([`HookEvent::is_blocking`]: before a tool call, a user prompt) it
//!   blocks, so a broken hook never lets through what it was meant to
//!   judge. For the other events it is ignored.
//!
//! A binding may also run a command ([`command`]): a hook written for
//! Claude Code, run unchanged through `/bin/sh -c` inside the confinement
//! of every native program, answering by exit code and JSON; its answer
//! folds into the same [`Outcome`].
//!
//! A rewrite never widens what the permission policy allows: the dispatcher
//! validates the new arguments against the tool's schema and judges the
//! call by the stricter of the verdicts on the original and the rewritten
//! arguments ([`stricter`]).

use crate::manifest::{CommandHook, HookBinding, HookTarget};
use crate::policy::{Decision, Verdict as PolicyVerdict};
use crate::protocol::{Event, HookDecision, HookEvent, HookInput, Verdict};
use crate::runtime::{Plugin, Plugins};
use std::sync::{Arc, Mutex};

pub mod command;

/// Where the hooks' decisions are recorded, an [`Event::Hook`] each: the
/// session log and the front-end, or the MCP server's host log. A call's
/// `Sink` (the call pipeline's) is one.
pub trait Emit: Send {
    /// Records one event.
    fn emit(&mut self, event: Event) -> anyhow::Result<()>;

    /// Records one event the caller goes on using (a call's end, whose
    /// outcome is the call's answer). The default records a copy; a sink
    /// that keeps nothing of the event (the host log of a front-end without
    /// a session) reads it in place, so a large output is not copied only
    /// to be dropped.
    fn emit_ref(&mut self, event: &Event) -> anyhow::Result<()> {
        self.emit(event.clone())
    }
}

/// What the hooks of one event decided together.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Refused: the reason, naming the hook (a block, or a failure of a
    /// hook of a blocking event).
    pub blocked: Option<String>,
    /// Reasons to ask the user (before a tool call), naming each hook.
    pub ask: Vec<String>,
    /// Context for the model, in order, each naming its hook.
    pub context: Vec<String>,
    /// The arguments after the last rewrite, when a hook rewrote them.
    pub rewrite: Option<String>,
}

impl Outcome {
    /// The context texts as one block for the model, or `None`.
    pub fn context_text(&self) -> Option<String> {
        (!self.context.is_empty()).then(|| self.context.join("\n\n"))
    }
}

/// One hook's context as the model reads it.
pub fn context_entry(plugin: &str, text: &str) -> String {
    format!("[context from hook `{plugin}`]\n{text}")
}

/// A prompt with the context its `user_prompt` hooks added, as the model
/// reads it (and as a resumed session rebuilds it from the log).
pub fn with_context(prompt: &str, context: &[String]) -> String {
    if context.is_empty() {
        return prompt.to_owned();
    }
    format!("{prompt}\n\n{}", context.join("\n\n"))
}

/// What the model reads when a `stop` hook blocks its final answer: the
/// next prompt of the run.
pub fn go_on(plugin: &str, reason: &str) -> String {
    format!("[hook `{plugin}` did not let the run stop]\n{reason}")
}

/// A binding with what it runs.
struct Bound {
    binding: HookBinding,
    runs: Runs,
}

/// What a bound hook runs.
enum Runs {
    /// A loaded hook plugin.
    Plugin(Arc<Plugin>),
    /// A command line, run confined.
    Command(Box<CommandHook>),
}

impl Bound {
    /// Whether the hook could carry data off the machine: it is granted
    /// the network, or a program that has it.
    fn networked(&self) -> bool {
        match &self.runs {
            Runs::Plugin(plugin) => {
                let decl = plugin.decl();
                !decl.net.is_empty() || decl.exec.iter().any(|g| g.network.reaches())
            }
            Runs::Command(c) => c.net.reaches(),
        }
    }

    /// Its name in messages and the log, safe for a terminal.
    fn name(&self) -> String {
        match &self.runs {
            Runs::Plugin(plugin) => plugin.decl().name.clone(),
            Runs::Command(_) => crate::terminal::inert(&self.binding.name()).into_owned(),
        }
    }

    /// Runs the hook on `input`: its verdict and a note for the log, or
    /// why it failed.
    async fn answer(
        &self,
        input: &HookInput,
        session: &command::Session,
    ) -> Result<command::Answer, String> {
        let event = input.event();
        match &self.runs {
            Runs::Plugin(plugin) => match plugin.handle_hook(input).await {
                Err(e) => Err(e.to_string()),
                Ok(v) if !v.fits(event) => Err(format!(
                    "hook `{}` answered `{}`, which {} hooks cannot do",
                    plugin.decl().name,
                    v.name(),
                    event.as_str()
                )),
                Ok(verdict) => Ok(command::Answer {
                    verdict,
                    note: String::new(),
                }),
            },
            Runs::Command(hook) => {
                let mut answer = command::run(hook, input, session).await?;
                if let (Verdict::Rewrite(updated), Some(call)) = (&answer.verdict, input.call()) {
                    answer.verdict =
                        Verdict::Rewrite(command::rewritten(&call.name, &call.arguments, updated));
                }
                Ok(answer)
            }
        }
    }
}

/// The hooks of a session: every `[hooks]` binding with its plugin or
/// command.
#[derive(Default)]
pub struct Hooks {
    bound: Vec<Bound>,
    /// What command hooks are told of the session.
    session: Mutex<command::Session>,
}

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(
                self.bound
                    .iter()
                    .map(|b| (b.binding.event.as_str(), b.binding.name())),
            )
            .finish()
    }
}

/// Why a `[hooks]` binding could not be bound; the text names the entry
/// and where it is declared.
#[derive(Debug, Clone, thiserror::Error)]
pub enum BindError {
    /// The binding names a plugin that is not loaded.
    #[error(
        "hooks.{} ({}): plugin `{}` is not loaded",
        .0.event.as_str(),
        .0.origin,
        .0.name()
    )]
    NotLoaded(HookBinding),
    /// The binding names a plugin that is not a hook component.
    #[error(
        "hooks.{} ({}): plugin `{}` ({}) is not a hook plugin: it does not export \
         corral:plugin/hook@0.1.0; bind a hook component, or remove the binding",
        binding.event.as_str(),
        binding.origin,
        binding.name(),
        component
    )]
    NotAHook {
        /// The binding.
        binding: HookBinding,
        /// The plugin's source, as its entry names it.
        component: String,
    },
}

impl From<BindError> for String {
    fn from(e: BindError) -> Self {
        e.to_string()
    }
}

impl Hooks {
    /// No hooks.
    pub fn none() -> Self {
        Self::default()
    }

    /// The hooks of `bindings`, each with its plugin from `plugins`, which
    /// must export `corral:plugin/hook` (a plugin whose tools came from the
    /// description cache is compiled now to tell), or its command.
    pub async fn new(bindings: &[HookBinding], plugins: &Plugins) -> Result<Self, BindError> {
        let mut bound = Vec::with_capacity(bindings.len());
        for binding in bindings {
            let name = match &binding.target {
                HookTarget::Command(hook) => {
                    bound.push(Bound {
                        binding: binding.clone(),
                        runs: Runs::Command(hook.clone()),
                    });
                    continue;
                }
                HookTarget::Plugin(name) => name,
            };
            let plugin = plugins
                .plugins()
                .iter()
                .find(|p| p.decl().name == *name)
                .cloned()
                .ok_or_else(|| BindError::NotLoaded(binding.clone()))?;
            if !plugin.is_hook().await {
                return Err(BindError::NotAHook {
                    binding: binding.clone(),
                    component: plugin.decl().source.to_string(),
                });
            }
            bound.push(Bound {
                binding: binding.clone(),
                runs: Runs::Plugin(plugin),
            });
        }
        Ok(Self {
            bound,
            session: Mutex::default(),
        })
    }

    /// Tells command hooks the session's id (Claude Code's `session_id`).
    pub fn set_session(&self, id: &str) {
        if let Ok(mut s) = self.session.lock() {
            s.id = id.to_owned();
        }
    }

    /// What command hooks are told of the session now.
    fn session(&self) -> command::Session {
        self.session.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Notes whether the `stop` hooks kept the run going (`stop_hook_active`
    /// for the next stop); a new prompt starts afresh.
    fn note_stop(&self, event: HookEvent, blocked: bool) {
        if !matches!(event, HookEvent::Stop | HookEvent::UserPrompt) {
            return;
        }
        if let Ok(mut s) = self.session.lock() {
            s.stop_active = event == HookEvent::Stop && blocked;
        }
    }

    /// Whether any hook is bound to `event`.
    pub fn has(&self, event: HookEvent) -> bool {
        self.bound.iter().any(|b| b.binding.event == event)
    }

    /// Runs the hooks bound to `input`'s event (and, for tool events,
    /// matching its tool) in order, logs each decision to `sink`, and folds
    /// them; see the module documentation.
    pub async fn run(&self, input: HookInput, sink: &mut dyn Emit) -> anyhow::Result<Outcome> {
        self.run_withholding(input, &[], sink).await
    }

    /// Runs the hooks as [`Hooks::run`] does, where `input` carries content
    /// labelled sensitive by `sensitive` (its sources; empty for none): a
    /// hook granted the network (or a program with it) gets the input with
    /// that content withheld ([`HookInput::withheld`]), as the exfiltration
    /// guard would hold the model's own call that could send it. A user may
    /// be absent when hooks run, so the hook is not held for approval; it
    /// still runs, and sees that something was withheld and why.
    pub async fn run_withholding(
        &self,
        input: HookInput,
        sensitive: &[String],
        sink: &mut dyn Emit,
    ) -> anyhow::Result<Outcome> {
        let event = input.event();
        let withheld = (!sensitive.is_empty()).then(|| input.withheld(sensitive));
        let mut input = input;
        let mut outcome = Outcome::default();
        let tool = input.call().map(|c| c.name.clone());
        let call_id = input.call().map(|c| c.id.clone());
        let session = self.session();
        for bound in &self.bound {
            if bound.binding.event != event || !bound.binding.matches(tool.as_deref()) {
                continue;
            }
            let name = bound.name();
            let given = match &withheld {
                Some(withheld) if bound.networked() => {
                    tracing::info!(hook = %name, "sensitive content withheld from a hook with the network");
                    withheld
                }
                _ => &input,
            };
            let answer = match bound.answer(given, &session).await {
                Err(why) => {
                    let shown = crate::terminal::inert(&why);
                    tracing::warn!(hook = %name, event = event.as_str(), "{shown}");
                    sink.emit(Event::Hook {
                        event,
                        plugin: name.clone(),
                        call_id: call_id.clone(),
                        decision: HookDecision::Failed,
                        detail: why.clone(),
                    })?;
                    if event.is_blocking() {
                        outcome.blocked = Some(format!(
                            "blocked: the {} hook `{name}` failed, and a failed hook blocks \
                             (fix or remove the hook): {why}",
                            event.as_str()
                        ));
                        break;
                    }
                    continue;
                }
                Ok(answer) => answer,
            };
            let verdict = answer.verdict;
            let (decision, detail) = verdict.logged();
            let detail = match (detail.is_empty(), answer.note.is_empty()) {
                (_, true) => detail.to_owned(),
                (true, false) => answer.note,
                (false, false) => format!("{detail}\n({})", answer.note),
            };
            sink.emit(Event::Hook {
                event,
                plugin: name.clone(),
                call_id: call_id.clone(),
                decision,
                detail,
            })?;
            match verdict {
                Verdict::Continue => {}
                Verdict::Block(reason) => {
                    outcome.blocked = Some(if event == HookEvent::Stop {
                        go_on(&name, &reason)
                    } else {
                        format!("blocked by hook `{name}`: {reason}")
                    });
                    break;
                }
                Verdict::Ask(reason) => outcome.ask.push(format!("hook `{name}`: {reason}")),
                Verdict::AddContext(text) => outcome.context.push(context_entry(&name, &text)),
                Verdict::Rewrite(arguments) => {
                    if let HookInput::BeforeTool { call, .. } = &mut input {
                        call.arguments = arguments.clone();
                    }
                    outcome.rewrite = Some(arguments);
                }
            }
        }
        self.note_stop(event, outcome.blocked.is_some());
        Ok(outcome)
    }

    /// Runs the `before_compact` hooks: `blocked` keeps the history as it
    /// is, `context` is guidance for the summary.
    pub async fn pre_compact(
        &self,
        manual: bool,
        messages: u32,
        sink: &mut dyn Emit,
    ) -> anyhow::Result<Outcome> {
        self.run(HookInput::BeforeCompact { manual, messages }, sink)
            .await
    }

    /// Runs the `subagent_stop` hooks: `blocked` sends the sub-agent on,
    /// with the reason as its next prompt.
    pub async fn subagent_stop(
        &self,
        task: &str,
        text: &str,
        sink: &mut dyn Emit,
    ) -> anyhow::Result<Outcome> {
        self.run(
            HookInput::SubagentStop {
                task: task.to_owned(),
                text: text.to_owned(),
            },
            sink,
        )
        .await
    }
}

/// The hooks of one agent session and what they left for the model: the
/// `session_start` context joins the system prompt for the session.
#[derive(Debug)]
pub struct SessionHooks {
    hooks: Arc<Hooks>,
    /// `Some(resumed)` until `session_start` has run.
    pending_start: Option<bool>,
    context: Option<String>,
}

impl SessionHooks {
    /// The hooks of a session that starts (or, `resumed`, is reopened).
    pub fn new(hooks: Arc<Hooks>, resumed: bool) -> Self {
        Self {
            hooks,
            pending_start: Some(resumed),
            context: None,
        }
    }

    /// Runs the `session_start` hooks, once per session (or resume).
    pub async fn start(&mut self, session_id: &str, sink: &mut dyn Emit) -> anyhow::Result<()> {
        let Some(resumed) = self.pending_start.take() else {
            return Ok(());
        };
        self.hooks.set_session(session_id);
        if !self.hooks.has(HookEvent::SessionStart) {
            return Ok(());
        }
        let input = HookInput::SessionStart {
            session_id: session_id.to_owned(),
            resumed,
        };
        self.context = self.hooks.run(input, sink).await?.context_text();
        Ok(())
    }

    /// The system prompt with the `session_start` context.
    pub fn system_prompt(&self, system: String) -> String {
        match &self.context {
            Some(context) => format!("{system}\n\n{context}"),
            None => system,
        }
    }

    /// Runs the `user_prompt` hooks: the prompt the model reads (with their
    /// context), or `Err` with why it was blocked.
    pub(crate) async fn prompt(
        &self,
        prompt: &str,
        sink: &mut dyn Emit,
    ) -> anyhow::Result<Result<String, String>> {
        self.hooks.note_stop(HookEvent::UserPrompt, false);
        if !self.hooks.has(HookEvent::UserPrompt) {
            return Ok(Ok(prompt.to_owned()));
        }
        let input = HookInput::UserPrompt {
            text: prompt.to_owned(),
        };
        let outcome = self.hooks.run(input, sink).await?;
        Ok(match outcome.blocked {
            Some(why) => Err(format!("the prompt was not sent: {why}")),
            None => Ok(with_context(prompt, &outcome.context)),
        })
    }

    /// Runs the `stop` hooks on a final answer: `Some` is the prompt the
    /// run goes on with when one blocked the stop.
    pub async fn stop(&self, text: &str, sink: &mut dyn Emit) -> anyhow::Result<Option<String>> {
        if !self.hooks.has(HookEvent::Stop) {
            return Ok(None);
        }
        let input = HookInput::Stop {
            text: text.to_owned(),
        };
        Ok(self.hooks.run(input, sink).await?.blocked)
    }

    /// Runs the `session_end` hooks.
    pub async fn end(&self, session_id: &str, sink: &mut dyn Emit) -> anyhow::Result<()> {
        if self.hooks.has(HookEvent::SessionEnd) {
            let input = HookInput::SessionEnd {
                session_id: session_id.to_owned(),
            };
            self.hooks.run(input, sink).await?;
        }
        Ok(())
    }
}

/// The stricter of two policy verdicts (deny-and-stop, deny, ask, allow):
/// how a call whose arguments a hook rewrote is judged, from the verdicts
/// on its rewritten and its original arguments, so a rewrite can narrow
/// what runs but never make a call more allowed.
pub fn stricter(rewritten: PolicyVerdict, original: PolicyVerdict) -> PolicyVerdict {
    fn rank(d: &Decision) -> u8 {
        match d {
            Decision::Allow => 0,
            Decision::Ask => 1,
            Decision::Deny { stop: false } => 2,
            Decision::Deny { stop: true } => 3,
        }
    }
    if rank(&original.decision) > rank(&rewritten.decision) {
        PolicyVerdict {
            decision: original.decision,
            reason: format!(
                "{} (judged on the call's original arguments; a hook's rewrite cannot make a call more allowed)",
                original.reason
            ),
        }
    } else {
        rewritten
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_event_honours_only_what_it_can_do() {
        use HookEvent as E;
        let all = |v: Verdict| -> Vec<HookEvent> {
            HookEvent::ALL.into_iter().filter(|e| v.fits(*e)).collect()
        };
        assert_eq!(all(Verdict::Continue), HookEvent::ALL.to_vec());
        assert_eq!(all(Verdict::Rewrite("{}".into())), vec![E::BeforeTool]);
        assert_eq!(all(Verdict::Ask("".into())), vec![E::BeforeTool]);
        assert_eq!(
            all(Verdict::Block("".into())),
            vec![
                E::UserPrompt,
                E::BeforeTool,
                E::AfterTool,
                E::AfterToolFailure,
                E::BeforeCompact,
                E::Stop,
                E::SubagentStop
            ]
        );
        assert_eq!(
            all(Verdict::AddContext("".into())),
            vec![
                E::SessionStart,
                E::UserPrompt,
                E::AfterTool,
                E::AfterToolFailure,
                E::BeforeCompact
            ]
        );
    }

    #[test]
    fn a_rewrite_is_judged_by_the_stricter_verdict() {
        let v = |decision, reason: &str| PolicyVerdict {
            decision,
            reason: reason.into(),
        };
        let deny = Decision::Deny { stop: false };
        let judged = stricter(v(Decision::Allow, "allow rule"), v(deny, "deny rule"));
        assert_eq!(judged.decision, deny);
        assert!(judged.reason.starts_with("deny rule"), "{}", judged.reason);
        let judged = stricter(v(Decision::Allow, "mode"), v(Decision::Ask, "ask rule"));
        assert_eq!(judged.decision, Decision::Ask);
        let judged = stricter(v(deny, "deny new"), v(Decision::Allow, "allow old"));
        assert_eq!(
            (judged.decision, judged.reason.as_str()),
            (deny, "deny new")
        );
        let judged = stricter(v(Decision::Deny { stop: true }, "stop"), v(deny, "deny"));
        assert_eq!(judged.decision, Decision::Deny { stop: true });
    }

    /// What hooks added to the conversation comes back on resume: the
    /// context of a prompt (and not that of a blocked one) and the prompt a
    /// blocking `stop` hook sent the model on with.
    #[test]
    fn a_resumed_history_keeps_what_hooks_added() {
        use crate::protocol::Message;
        let hook = |event, decision, detail: &str| Event::Hook {
            event,
            plugin: "h".into(),
            call_id: None,
            decision,
            detail: detail.into(),
        };
        let events = [
            Event::TurnBegin { turn: 1 },
            hook(HookEvent::UserPrompt, HookDecision::AddContext, "dropped"),
            hook(HookEvent::UserPrompt, HookDecision::Block, "no"),
            Event::TurnBegin { turn: 2 },
            hook(
                HookEvent::UserPrompt,
                HookDecision::AddContext,
                "branch main",
            ),
            Event::UserMessage {
                text: "fix it".into(),
            },
            hook(HookEvent::Stop, HookDecision::Block, "run the tests"),
        ];
        let records = crate::log::numbered(events);
        let (history, turn, open) = crate::agent::replay_history(&records);
        assert_eq!(turn, 2);
        assert!(open.is_empty());
        assert_eq!(
            history,
            [
                Message::User {
                    text: with_context("fix it", &[context_entry("h", "branch main")])
                },
                Message::User {
                    text: go_on("h", "run the tests")
                },
            ]
        );
    }

    /// A sink that keeps the events.
    #[derive(Default)]
    struct Kept(Vec<Event>);

    impl Emit for Kept {
        fn emit(&mut self, event: Event) -> anyhow::Result<()> {
            self.0.push(event);
            Ok(())
        }
    }

    /// The entry points the compaction and sub-agent code call run the
    /// hooks of their own events only, and with none bound decide nothing.
    #[tokio::test]
    async fn compaction_and_subagent_entry_points_run_their_own_events() {
        let hooks = Hooks::none();
        let mut sink = Kept::default();
        let out = hooks.pre_compact(true, 12, &mut sink).await.unwrap();
        assert_eq!(out, Outcome::default());
        let out = hooks.subagent_stop("t", "done", &mut sink).await.unwrap();
        assert_eq!(out, Outcome::default());
        assert!(sink.0.is_empty());
        assert!(!hooks.has(HookEvent::BeforeCompact));
        assert_eq!(
            HookInput::BeforeCompact {
                manual: true,
                messages: 1
            }
            .event(),
            HookEvent::BeforeCompact
        );
        assert_eq!(
            HookInput::SubagentStop {
                task: String::new(),
                text: String::new()
            }
            .event(),
            HookEvent::SubagentStop
        );
    }
}
