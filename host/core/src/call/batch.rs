//! The one orchestrator of the steps: the calls of one turn (the loop's
//! model answer, a subagent's, or one MCP `tools/call`) are each checked
//! and admitted in order (approvals are asked one at a time), then run:
//! consecutive read-only calls together, every other call alone. Every call
//! gets one begin and one end event, in call order, and its result comes
//! back in call order.

use super::run::Done;
use super::{CallOutcome, Checked, Dispatcher, PluginRunner, Runner, Sink};
use crate::protocol::{Event, FinishReason, PlanStep, StopReason, ToolCall, ToolOutcome};
use crate::runtime::Touched;
use tokio_util::sync::CancellationToken;

/// What became of a batch.
#[derive(Debug, Clone, PartialEq)]
pub struct Ran {
    /// Each call's result as the model reads it, in call order.
    pub outcomes: Vec<ToolOutcome>,
    /// Why the run must stop, if it must: a deny-and-stop rule, an
    /// interrupt while tools ran, a fatal tool error.
    pub stop: Option<(StopReason, String)>,
    /// The plan the batch's last successful `update_plan` set, if any.
    pub plan: Option<Vec<PlanStep>>,
    /// How each call ended, in call order.
    pub ended: Vec<Ended>,
}

/// How a call ended, for a front-end that tells a tool's own answer apart
/// from a refusal or a failure of its sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Ended {
    /// The tool ran and answered (maybe with an error of its own).
    Ran,
    /// The call could not run: unknown tool or invalid arguments.
    InvalidArguments,
    /// Refused before running: a protected path, the policy, a hook or the
    /// user.
    Refused,
    /// The tool or its sandbox failed (trap, timeout, limit, tool error).
    Failed,
    /// The tool failed and asked the agent to stop.
    Fatal,
    /// The user interrupted it.
    Interrupted,
    /// Not run because an earlier call of the turn stopped the run.
    Skipped,
}

impl Ended {
    fn of(outcome: &CallOutcome) -> Self {
        match outcome {
            CallOutcome::Output { .. } => Ended::Ran,
            CallOutcome::Invalid(_) => Ended::InvalidArguments,
            CallOutcome::Refused { .. } => Ended::Refused,
            CallOutcome::Failed(_) => Ended::Failed,
            CallOutcome::Fatal(_) => Ended::Fatal,
            CallOutcome::Interrupted => Ended::Interrupted,
            CallOutcome::Skipped(_) => Ended::Skipped,
        }
    }
}

impl Dispatcher {
    /// Takes `calls` the whole way: check, hooks, protected paths, policy
    /// and guard, egress, approval, run (a host tool through `runner`), end. `finish` is why
    /// the model's answer ended, which tells a call cut by the token limit
    /// apart.
    pub async fn run_batch(
        &self,
        calls: &[ToolCall],
        finish: Option<FinishReason>,
        runner: &dyn Runner,
        sink: &mut dyn Sink,
        cancel: &CancellationToken,
    ) -> anyhow::Result<Ran> {
        tracing::debug!(target: "corral::call", calls = calls.len(), "tool-call batch");
        let (admitted, mut stop) = self.admit_all(calls, finish, sink, cancel).await?;
        let mut outcomes = Vec::with_capacity(calls.len());
        let mut plan = None;
        let mut ended = Vec::with_capacity(calls.len());
        let mut i = 0;
        while i < calls.len() {
            let refused = match &admitted[i] {
                Err(outcome) => Some(outcome.clone()),
                Ok(_) => stop
                    .as_ref()
                    .map(|(_, why)| CallOutcome::Skipped(why.clone())),
            };
            if let Some(outcome) = refused {
                sink.emit(Event::ToolCallBegin {
                    call: calls[i].clone(),
                })?;
                let done = Done {
                    outcome,
                    touched: Touched::default(),
                    labels: Vec::new(),
                };
                ended.push(Ended::of(&done.outcome));
                outcomes.push(
                    self.end(&calls[i], done, 0, runner, sink, &mut plan)
                        .await?,
                );
                i += 1;
                continue;
            }
            // A group: one call, or a run of consecutive read-only calls.
            let read_only =
                |a: &Result<Checked, CallOutcome>| a.as_ref().is_ok_and(|c| c.is_read_only());
            let mut end = i + 1;
            if read_only(&admitted[i]) {
                while end < calls.len() && read_only(&admitted[end]) {
                    end += 1;
                }
            }
            let group: Vec<&Checked> = admitted[i..end].iter().flatten().collect();
            let (ran, halt) = self
                .run_group(&group, runner, sink, cancel, &mut plan)
                .await?;
            for (outcome, end) in ran {
                outcomes.push(outcome);
                ended.push(end);
            }
            if halt.is_some() {
                stop = halt;
            }
            i = end;
        }
        Ok(Ran {
            outcomes,
            stop,
            plan,
            ended,
        })
    }

    /// One call through [`Dispatcher::run_batch`] with plugin tools only
    /// (the MCP server's `tools/call`): its result as the client reads it.
    pub async fn run_one(
        &self,
        call: &ToolCall,
        sink: &mut dyn Sink,
        cancel: &CancellationToken,
    ) -> anyhow::Result<ToolOutcome> {
        Ok(self.run_alone(call, sink, cancel).await?.0)
    }

    /// One call through [`Dispatcher::run_batch`] with no host tools (`corral
    /// tool call`): its result and how it ended.
    pub async fn run_alone(
        &self,
        call: &ToolCall,
        sink: &mut dyn Sink,
        cancel: &CancellationToken,
    ) -> anyhow::Result<(ToolOutcome, Ended)> {
        let ran = self
            .run_batch(
                std::slice::from_ref(call),
                None,
                &PluginRunner,
                sink,
                cancel,
            )
            .await?;
        ran.outcomes
            .into_iter()
            .zip(ran.ended)
            .next()
            .ok_or_else(|| anyhow::anyhow!("the call pipeline gave no result for `{}`", call.name))
    }

    /// Checks and admits each call in order; a deny-and-stop skips the rest.
    async fn admit_all(
        &self,
        calls: &[ToolCall],
        finish: Option<FinishReason>,
        sink: &mut dyn Sink,
        cancel: &CancellationToken,
    ) -> anyhow::Result<(
        Vec<Result<Checked, CallOutcome>>,
        Option<(StopReason, String)>,
    )> {
        let mut admitted = Vec::with_capacity(calls.len());
        let mut stop: Option<(StopReason, String)> = None;
        for call in calls {
            if let Some((_, why)) = &stop {
                admitted.push(Err(CallOutcome::Skipped(why.clone())));
                continue;
            }
            let admission = self.admit(call, finish, sink, cancel).await?;
            if let Err(CallOutcome::Refused {
                message,
                stop: true,
            }) = &admission
            {
                stop = Some((StopReason::PermissionDenied, message.clone()));
            }
            admitted.push(admission);
        }
        Ok((admitted, stop))
    }

    /// Steps 1 to 6 for one call, in the module's order, each taking the
    /// previous one's value: the admitted call, or its refusal. Every
    /// decision is logged.
    async fn admit(
        &self,
        call: &ToolCall,
        finish: Option<FinishReason>,
        sink: &mut dyn Sink,
        cancel: &CancellationToken,
    ) -> anyhow::Result<Result<Checked, CallOutcome>> {
        let checked = match self.check(call, finish) {
            Ok(checked) => checked,
            Err(invalid) => return Ok(Err(invalid)),
        };
        let hooked = match self.before_tool(checked, sink).await? {
            Ok(hooked) => hooked,
            Err(refused) => return Ok(Err(refused)),
        };
        let protected = match self.protect(hooked, sink)? {
            Ok(protected) => protected,
            Err(refused) => return Ok(Err(refused)),
        };
        let judged = self.judge(protected);
        let routed = self.egress(judged);
        self.approve(routed, sink, cancel).await
    }

    /// Runs the admitted calls of one group together and ends each, in
    /// order; the stop an interrupt or a fatal error calls for.
    async fn run_group(
        &self,
        group: &[&Checked],
        runner: &dyn Runner,
        sink: &mut dyn Sink,
        cancel: &CancellationToken,
        plan: &mut Option<Vec<PlanStep>>,
    ) -> anyhow::Result<(Vec<(ToolOutcome, Ended)>, Option<(StopReason, String)>)> {
        for checked in group {
            sink.emit(Event::ToolCallBegin {
                call: checked.call.clone(),
            })?;
        }
        // A call with effects changes the world: the log says so first, on
        // disk (the answer that asked for it, its permission, its begin), so
        // a crash from here on cannot forget it ran. Calls that only read
        // wait for nothing.
        if group.iter().any(|c| !c.is_read_only()) {
            sink.flush().await?;
        }
        let started = std::time::Instant::now();
        let work = futures::future::join_all(group.iter().map(|c| self.run(c, runner)));
        let results = tokio::select! {
            biased;
            () = cancel.cancelled() => None,
            r = work => Some(r),
        };
        // Interrupted subagents write their stop before this turn's.
        runner.settle().await;
        let ms = started.elapsed().as_millis() as u64;
        let mut outcomes = Vec::with_capacity(group.len());
        let mut stop = None;
        match results {
            None => {
                for checked in group {
                    let done = Done {
                        outcome: runner
                            .interrupted(&checked.call.id)
                            .unwrap_or(CallOutcome::Interrupted),
                        touched: Touched::default(),
                        labels: Vec::new(),
                    };
                    let end = Ended::of(&done.outcome);
                    let outcome = self
                        .end(&checked.call, done, ms, runner, sink, plan)
                        .await?;
                    outcomes.push((outcome, end));
                }
                stop = Some((
                    StopReason::Interrupted,
                    "interrupted while tools were running".into(),
                ));
            }
            Some(results) => {
                for (checked, done) in group.iter().zip(results) {
                    if let CallOutcome::Fatal(m) = &done.outcome {
                        stop = Some((
                            StopReason::FatalToolError,
                            format!("`{}` failed fatally: {m}", checked.call.name),
                        ));
                    }
                    let end = Ended::of(&done.outcome);
                    let outcome = self
                        .end(&checked.call, done, ms, runner, sink, plan)
                        .await?;
                    outcomes.push((outcome, end));
                }
            }
        }
        Ok((outcomes, stop))
    }

    /// Step 8 for one call, then the event the runner logs after an end
    /// (the plan an `update_plan` set, which the batch also returns).
    async fn end(
        &self,
        call: &ToolCall,
        done: Done,
        duration_ms: u64,
        runner: &dyn Runner,
        sink: &mut dyn Sink,
        plan: &mut Option<Vec<PlanStep>>,
    ) -> anyhow::Result<ToolOutcome> {
        let note = runner.note(call, &done.outcome);
        let ended = self.finish(call, done, duration_ms, sink).await?;
        if let Some(note) = note {
            if let Event::PlanUpdated { steps, .. } = &note {
                *plan = Some(steps.clone());
            }
            sink.emit(note)?;
        }
        Ok(ended)
    }
}
