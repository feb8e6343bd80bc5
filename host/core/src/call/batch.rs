//! The one orchestrator of the steps: the calls of one turn (the loop's
//! model answer, a subagent's, or one MCP `tools/call`) are each checked
//! and admitted in order (approvals are asked one at a time), then run:
//! consecutive read-only calls together, every other call alone. Every call
//! gets one begin and one end event, in call order, and its result comes
//! back in call order.

use super::{CallOutcome, Checked, Dispatcher, PluginRunner, Runner, Sink};
use crate::protocol::{Event, FinishReason, StopReason, ToolCall, ToolOutcome};
use tokio_util::sync::CancellationToken;

/// What became of a batch.
#[derive(Debug, Clone, PartialEq)]
pub struct Ran {
    /// Each call's result as the model reads it, in call order.
    pub outcomes: Vec<ToolOutcome>,
    /// Why the run must stop, if it must: a deny-and-stop rule, an
    /// interrupt while tools ran, a fatal tool error.
    pub stop: Option<(StopReason, String)>,
}

impl Dispatcher {
    /// Takes `calls` the whole way: check, hooks, protected paths, policy
    /// and guard, approval, run (through `runner`), end. `finish` is why
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
                outcomes.push(self.end(&calls[i], outcome, 0, runner, sink).await?);
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
            let (ran, halt) = self.run_group(&group, runner, sink, cancel).await?;
            outcomes.extend(ran);
            if halt.is_some() {
                stop = halt;
            }
            i = end;
        }
        Ok(Ran { outcomes, stop })
    }

    /// One call through [`Dispatcher::run_batch`] with plugin tools only
    /// (the MCP server's `tools/call`): its result as the client reads it.
    pub async fn run_one(
        &self,
        call: &ToolCall,
        sink: &mut dyn Sink,
        cancel: &CancellationToken,
    ) -> anyhow::Result<ToolOutcome> {
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
            let mut checked = match self.check(call, finish) {
                Ok(c) => c,
                Err(invalid) => {
                    admitted.push(Err(invalid));
                    continue;
                }
            };
            match self.permit(&mut checked, sink, cancel).await? {
                None => admitted.push(Ok(checked)),
                Some(refused) => {
                    if let CallOutcome::Refused {
                        message,
                        stop: true,
                    } = &refused
                    {
                        stop = Some((StopReason::PermissionDenied, message.clone()));
                    }
                    admitted.push(Err(refused));
                }
            }
        }
        Ok((admitted, stop))
    }

    /// Steps 2–5 for one checked call, in the order [`super::judge`]
    /// documents. `None` lets the call run; every decision is logged.
    async fn permit(
        &self,
        checked: &mut Checked,
        sink: &mut dyn Sink,
        cancel: &CancellationToken,
    ) -> anyhow::Result<Option<CallOutcome>> {
        let hooked = match self.before_tool_hooks(checked, sink).await? {
            Ok(hooked) => hooked,
            Err(refused) => return Ok(Some(refused)),
        };
        if let Some(refused) = self.protect(checked, sink)? {
            return Ok(Some(refused));
        }
        let judged = self.judge(checked, &hooked);
        let (judged, widening) = self.egress(checked, judged);
        let refused = self.approve(checked, judged, sink, cancel).await?;
        if refused.is_none() {
            checked.widened = widening.map(|w| w.grant);
        }
        Ok(refused)
    }

    /// Runs the admitted calls of one group together and ends each, in
    /// order; the stop an interrupt or a fatal error calls for.
    async fn run_group(
        &self,
        group: &[&Checked],
        runner: &dyn Runner,
        sink: &mut dyn Sink,
        cancel: &CancellationToken,
    ) -> anyhow::Result<(Vec<ToolOutcome>, Option<(StopReason, String)>)> {
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
        let work = futures::future::join_all(group.iter().map(|c| runner.run(c)));
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
                    let outcome = runner
                        .interrupted(&checked.call.id)
                        .unwrap_or(CallOutcome::Interrupted);
                    outcomes.push(self.end(&checked.call, outcome, ms, runner, sink).await?);
                }
                stop = Some((
                    StopReason::Interrupted,
                    "interrupted while tools were running".into(),
                ));
            }
            Some(results) => {
                for (checked, outcome) in group.iter().zip(results) {
                    if let CallOutcome::Fatal(m) = &outcome {
                        stop = Some((
                            StopReason::FatalToolError,
                            format!("`{}` failed fatally: {m}", checked.call.name),
                        ));
                    }
                    outcomes.push(self.end(&checked.call, outcome, ms, runner, sink).await?);
                }
            }
        }
        Ok((outcomes, stop))
    }

    /// Step 7 for one call, then whatever the runner does after an end.
    async fn end(
        &self,
        call: &ToolCall,
        outcome: CallOutcome,
        duration_ms: u64,
        runner: &dyn Runner,
        sink: &mut dyn Sink,
    ) -> anyhow::Result<ToolOutcome> {
        let note = runner.note(call, &outcome);
        let ended = self.finish(call, outcome, duration_ms, sink).await?;
        if let Some(note) = note {
            sink.emit(note)?;
        }
        Ok(ended)
    }
}
