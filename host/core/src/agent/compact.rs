//! Compaction: when the next request would take more than `compact_at` of
//! the model's context window, the older part of the history is summarised
//! by the same provider and replaced by the summary, and the request is
//! rebuilt as system prompt + summary + the most recent turns kept whole.
//!
//! The cut always falls just before an assistant message, so a tool call is
//! never separated from its result and the summary (a user message) is
//! followed by an assistant turn, as every API wants. The compaction is an
//! [`Event::Compacted`] in the log, after the events it replaces, which stay;
//! [`apply`] is the one function that turns it into the projection, live and
//! when a log is replayed, so `resume` rebuilds the same request.
//!
//! The summary request has its own shape: a system message with
//! [`SUMMARY_PROMPT`] and one user message holding the older part as a
//! transcript (long pieces cut in the middle to fit the window), no tools.

use super::budget::{self, Budget};
use super::{Agent, Out};
use crate::call::Emit as _;
use crate::protocol::{
    ChatRequest, ChatResponse, CompactTrigger, Event, Message, StopReason, StreamEvent,
};
use corral_sdk::cassette::SUMMARY_MESSAGE_MARK;
use std::sync::Arc;
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

/// The system message of a summary request. It starts with
/// [`SUMMARY_REQUEST_MARK`], by which a recorded cassette tells summary
/// requests apart.
pub const SUMMARY_PROMPT: &str = concat!(
    "You are summarising the earlier part of a coding agent's conversation",
    " so that the agent can go on without it. Write the summary the agent will",
    " continue from, under these headings:\n",
    "Task: what the user asked for, in their words where they matter.\n",
    "Decisions: what was decided and why; constraints and preferences learnt.\n",
    "Files: the files read, created or changed, and what changed in each.\n",
    "Remaining: what is done, what remains, and the next step.\n",
    "Be concrete (paths, names, commands, errors and their fixes). Answer with",
    " the summary only; do not call tools."
);

/// Share of the window the most recent turns may keep whole.
const KEEP_SHARE: f64 = 0.3;

/// Longest piece of a transcript when the window is unknown.
const PIECE_CEILING: usize = 8 * 1024;

/// What each message kept in a transcript too long for its headings is
/// counted at, at least.
const MIN_PIECE: usize = 64;

/// How a compaction went.
#[derive(Debug)]
pub(super) enum Compaction {
    /// The history now starts with a summary.
    Done,
    /// Nothing changed ([`Event::CompactionFailed`] says why).
    Failed,
    /// The user interrupted the summary request.
    Interrupted,
}

/// The message that stands for the summarised part.
pub fn summary_message(summary: &str) -> Message {
    Message::User {
        text: format!("{SUMMARY_MESSAGE_MARK}\n\n{}", summary.trim()),
    }
}

/// Replaces the first `replaced` messages of `history` by the summary. The
/// one place a compaction changes the projection, live and on replay.
///
/// Only messages are replaced: state that is not a message of the history
/// (a plan the model keeps with `update_plan`, say) is not in `history`, so
/// the summary can never swallow it; the request builder puts the latest of
/// such state back after the summary.
pub fn apply(history: &mut Vec<Message>, replaced: usize, summary: &str) {
    let replaced = replaced.min(history.len());
    history.splice(0..replaced, [summary_message(summary)]);
}

/// The plan as the model last set it with `update_plan`, as text for the
/// summary; `None` without a plan.
pub fn plan_text(plan: &[crate::protocol::PlanStep]) -> Option<String> {
    if plan.is_empty() {
        return None;
    }
    let mut text = String::from("The plan as it stands (kept with update_plan):");
    for step in plan {
        text.push_str(&format!("\n- [{}] {}", step.status.as_str(), step.step));
    }
    Some(text)
}

/// Where the older part ends: the smallest index of an assistant message
/// (after at least one message to summarise) from which the rest fits in
/// `keep` bytes; else the last assistant message. `None` when there is
/// nothing older than the last assistant turn.
#[cfg(test)]
pub fn cut_point(history: &[Message], keep: usize) -> Option<usize> {
    let sizes: Vec<usize> = history.iter().map(budget::json_size).collect();
    cut_point_sized(history, &sizes, keep)
}

/// [`cut_point`] with the JSON size of each message already known.
fn cut_point_sized(history: &[Message], sizes: &[usize], keep: usize) -> Option<usize> {
    let mut tail = vec![0usize; history.len() + 1];
    for i in (0..history.len()).rev() {
        tail[i] = tail[i + 1] + sizes[i];
    }
    let is_summary =
        |m: &Message| matches!(m, Message::User { text } if text.starts_with(SUMMARY_MESSAGE_MARK));
    let candidates: Vec<usize> = (1..history.len())
        .filter(|&i| matches!(history[i], Message::Assistant(_)))
        // Summarising only an earlier summary gains nothing.
        .filter(|&i| !(i == 1 && is_summary(&history[0])))
        .collect();
    candidates
        .iter()
        .copied()
        .find(|&i| tail[i] <= keep)
        .or_else(|| candidates.last().copied())
}

/// The summary request for `older` (the messages to summarise), sized to
/// `budget`'s window.
pub fn summary_request(model: &str, older: &[Message], budget: &Budget) -> ChatRequest {
    let max_out = budget.window().map(|w| {
        let quarter = w / 4;
        budget
            .info
            .as_ref()
            .and_then(|i| i.max_output_tokens)
            .map_or(quarter, |m| m.min(quarter))
            .clamp(64, 4096)
    });
    // What the transcript may take: the window, less the answer, the prompt
    // and a margin for the JSON around each piece.
    let room = budget.window().map(|w| {
        let used = budget.estimate(SUMMARY_PROMPT.len() + 512) + max_out.unwrap_or(0);
        budget.bytes_for(w.saturating_sub(used)) * 9 / 10
    });
    ChatRequest {
        model: model.to_owned(),
        messages: vec![
            Message::System {
                text: SUMMARY_PROMPT.to_owned(),
            },
            Message::User {
                text: format!(
                    "Summarise this conversation:\n\n{}",
                    transcript(older, room)
                ),
            },
        ],
        tools: Vec::new().into(),
        max_tokens: max_out,
        temperature: None,
    }
}

/// `messages` as text, each piece cut to fit `room` bytes in all.
pub fn transcript(messages: &[Message], room: Option<usize>) -> String {
    let mut heads = Vec::new();
    let mut bodies = Vec::new();
    // The provider knows the calls by the ids it gets back, not corral's.
    let mut wire = std::collections::HashMap::new();
    for m in messages {
        match m {
            Message::System { text } => {
                heads.push("[system]".to_owned());
                bodies.push(text.clone());
            }
            Message::User { text } => {
                heads.push("[user]".to_owned());
                bodies.push(text.clone());
            }
            Message::Assistant(a) => {
                heads.push("[assistant]".to_owned());
                bodies.push(a.text.to_string());
                for c in &a.tool_calls {
                    wire.insert(c.id.as_str(), c.wire_id());
                    heads.push(format!("[tool call {} {}]", c.wire_id(), c.name));
                    bodies.push(c.arguments.clone());
                }
            }
            Message::ToolResult(r) => {
                let error = if r.is_error { " error" } else { "" };
                let id = wire
                    .get(r.call_id.as_str())
                    .copied()
                    .unwrap_or(r.call_id.as_str());
                heads.push(format!("[tool result {id}{error}]"));
                bodies.push(r.content.clone());
            }
        }
    }
    // A history of many short messages may not fit even as headings: keep
    // the first (the task) and as many of the newest as take half the room
    // with a short piece each, and say how many were left out between.
    if let Some(room) = room {
        let fixed: usize = heads.iter().map(|h| h.len() + 2).sum();
        if fixed > room / 2 && heads.len() > 2 {
            let mut used = heads[0].len() + MIN_PIECE;
            let mut from = heads.len();
            while from > 1 {
                let cost = heads[from - 1].len() + 2 + bodies[from - 1].len().min(MIN_PIECE);
                if used + cost > room / 2 {
                    break;
                }
                used += cost;
                from -= 1;
            }
            let left_out = from - 1;
            if left_out > 0 {
                heads.splice(
                    1..from,
                    [format!("[… {left_out} earlier entries left out …]")],
                );
                bodies.splice(1..from, [String::new()]);
            }
        }
    }
    let fixed: usize = heads.iter().map(|h| h.len() + 2).sum();
    let cap = match room {
        Some(room) => water_level(&bodies, room.saturating_sub(fixed)),
        None => PIECE_CEILING,
    };
    let mut out = String::new();
    for (h, b) in heads.iter().zip(&bodies) {
        out.push_str(h);
        out.push('\n');
        out.push_str(&cut_middle(b, cap));
        out.push('\n');
    }
    out
}

/// The largest cap such that the pieces, each cut to it, fit in `room`.
fn water_level(pieces: &[String], room: usize) -> usize {
    let mut lens: Vec<usize> = pieces.iter().map(String::len).collect();
    lens.sort_unstable();
    let mut left = room;
    let mut n = lens.len();
    for len in lens {
        if len.saturating_mul(n) <= left {
            left -= len;
            n -= 1;
        } else {
            return left / n.max(1);
        }
    }
    usize::MAX
}

/// `text` cut to about `cap` bytes, keeping its start and end.
fn cut_middle(text: &str, cap: usize) -> String {
    const NOTE: usize = 40;
    if text.len() <= cap {
        return text.to_owned();
    }
    if cap <= NOTE {
        return format!("[{} bytes left out]", text.len());
    }
    let keep = cap - NOTE;
    let mut head = keep / 2;
    while !text.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = text.len() - (keep - head);
    while !text.is_char_boundary(tail) {
        tail += 1;
    }
    format!(
        "{}[… {} bytes left out …]{}",
        &text[..head],
        tail - head,
        &text[tail..]
    )
}

/// The last request of a log the provider counted: the bytes of its
/// [`Event::Context`] and the input tokens of the [`Event::RequestEnd`] that
/// answered it.
pub(super) fn last_calibration(records: &[crate::log::Record]) -> Option<(usize, u32)> {
    let mut bytes = None;
    let mut last = None;
    for r in records {
        match &r.event {
            Event::Context { bytes: b, .. } => bytes = Some(*b),
            Event::RequestEnd { usage: Some(u), .. } => {
                if let Some(b) = bytes.take()
                    && budget::plausible(b, u.input_tokens)
                {
                    last = Some((b, u.input_tokens));
                }
            }
            Event::ModelChanged { .. } | Event::ProviderChanged { .. } => last = None,
            _ => {}
        }
    }
    last
}

impl Agent {
    /// The model's limits, asked of the provider once (and again after the
    /// model or the provider changes). A window nobody reports is taken to
    /// be [`budget::DEFAULT_WINDOW`], said once with
    /// [`Event::WindowAssumed`], so the request stays bounded by
    /// compaction rather than by a plugin's memory.
    pub(super) async fn ensure_budget(
        &mut self,
        ui: &UnboundedSender<Event>,
    ) -> anyhow::Result<()> {
        if self.budget.is_some() {
            return Ok(());
        }
        let model = self.effective_model();
        let models = self.provider.models().await.unwrap_or_default();
        let mut info = budget::resolve(&models, &model, &self.options.models);
        if info.as_ref().and_then(|i| i.context_window).is_none() {
            info.get_or_insert_with(|| crate::protocol::ModelInfo {
                id: model.clone(),
                ..crate::protocol::ModelInfo::default()
            })
            .context_window = Some(budget::DEFAULT_WINDOW);
            // A cassette played back has no window to name: the note would
            // only ask the user to configure one for a recording.
            let replayed = matches!(
                &self.provider.decl().source,
                crate::manifest::Source::Builtin(name) if name == "replay"
            );
            if !replayed {
                self.emit(
                    ui,
                    Event::WindowAssumed {
                        model,
                        window: budget::DEFAULT_WINDOW,
                    },
                )?;
            }
        }
        let mut b = Budget::new(info, self.options.compact_at);
        if let Some((bytes, tokens)) = self.calibration {
            b.calibrate(bytes, tokens);
        }
        self.budget = Some(b);
        Ok(())
    }

    /// The model the request names, or the provider's configured one.
    fn effective_model(&self) -> String {
        if self.options.model.is_empty() {
            self.provider
                .decl()
                .config
                .get("model")
                .cloned()
                .unwrap_or_default()
        } else {
            self.options.model.clone()
        }
    }

    /// The JSON size of each message of the history. Each message is
    /// measured once, when first asked about: the history only grows
    /// between requests, and a compaction starts the measure again.
    pub(super) fn history_sizes(&mut self) -> &[usize] {
        if self.sizes.len() > self.history.len() {
            self.sizes.clear();
        }
        let known = self.sizes.len();
        self.sizes
            .extend(self.history[known..].iter().map(budget::json_size));
        &self.sizes
    }

    /// The size of the request [`Agent::build_request`] would build, as
    /// [`budget::request_bytes`] counts it, without building it: the
    /// request with the system prompt alone, plus each message of the
    /// history and the comma before it.
    /// The frame is measured once per turn: the system prompt, the tools
    /// and the settings do not change within one.
    fn request_size(&mut self, system: &str, tools: &Arc<[crate::protocol::ToolSpec]>) -> usize {
        let frame = match self.frame {
            Some(f) => f,
            None => {
                let f = budget::request_bytes(&ChatRequest {
                    model: self.options.model.clone(),
                    messages: vec![Message::System {
                        text: system.to_owned(),
                    }],
                    tools: tools.clone(),
                    max_tokens: self.options.max_tokens,
                    temperature: self.options.temperature,
                });
                self.frame = Some(f);
                f
            }
        };
        let sizes = self.history_sizes();
        frame + sizes.iter().sum::<usize>() + sizes.len()
    }

    /// The request for the history as it is.
    pub(super) fn build_request(
        &self,
        system: &str,
        tools: &Arc<[crate::protocol::ToolSpec]>,
    ) -> ChatRequest {
        let mut messages = Vec::with_capacity(self.history.len() + 1);
        messages.push(Message::System {
            text: system.to_owned(),
        });
        messages.extend(self.history.iter().cloned());
        ChatRequest {
            model: self.options.model.clone(),
            messages,
            tools: tools.clone(),
            max_tokens: self.options.max_tokens,
            temperature: self.options.temperature,
        }
    }

    /// The next request, compacted first when it would pass the threshold,
    /// and the [`Event::Context`] that reports its size. A stop when it
    /// cannot fit the window even so.
    pub(super) async fn prepare_request(
        &mut self,
        system: &str,
        tools: &Arc<[crate::protocol::ToolSpec]>,
        ui: &UnboundedSender<Event>,
        cancel: &CancellationToken,
    ) -> anyhow::Result<Result<(ChatRequest, usize), (StopReason, String)>> {
        self.ensure_budget(ui).await?;
        // Measured before it is built: a history far over the window is
        // compacted without being copied into a request first.
        let mut bytes = self.request_size(system, tools);
        let b = self
            .budget
            .clone()
            .unwrap_or_else(|| Budget::new(None, 1.0));
        if let Some(limit) = b.threshold()
            && b.estimate(bytes) > limit
        {
            match self.compact(CompactTrigger::Auto, ui, cancel).await? {
                Compaction::Done => bytes = self.request_size(system, tools),
                Compaction::Interrupted => {
                    return Ok(Err((
                        StopReason::Interrupted,
                        "interrupted while the history was being compacted".into(),
                    )));
                }
                Compaction::Failed => {}
            }
        }
        let tokens = b.estimate(bytes);
        if let Some(window) = b.window()
            && tokens > window
        {
            return Ok(Err((
                StopReason::ContextExhausted,
                format!(
                    "the next request takes about {tokens} tokens and the model's context window is {window}; \
                     compaction could not make it fit (see the events above)"
                ),
            )));
        }
        let request = self.build_request(system, tools);
        debug_assert_eq!(bytes, budget::request_bytes(&request));
        self.emit(
            ui,
            Event::Context {
                tokens,
                bytes,
                window: b.window(),
                share: b.share(tokens),
            },
        )?;
        Ok(Ok((request, bytes)))
    }

    /// Learns bytes per token from a request the provider counted.
    pub(super) fn calibrate(&mut self, bytes: usize, usage: Option<crate::protocol::Usage>) {
        if let (Some(b), Some(u)) = (self.budget.as_mut(), usage) {
            b.calibrate(bytes, u.input_tokens);
            if budget::plausible(bytes, u.input_tokens) {
                self.calibration = Some((bytes, u.input_tokens));
            }
        }
    }

    /// Compacts the history now (`/compact`, `corral compact`), outside a
    /// turn.
    pub async fn compact_now(&mut self, ui: &UnboundedSender<Event>) -> anyhow::Result<bool> {
        self.ensure_budget(ui).await?;
        let cancel = CancellationToken::new();
        Ok(matches!(
            self.compact(CompactTrigger::Manual, ui, &cancel).await?,
            Compaction::Done
        ))
    }

    /// Where every compaction starts (automatic, manual, or after the
    /// provider said the context is exceeded): summarises the older part of
    /// the history and replaces it, logging [`Event::Compacted`]; or logs
    /// [`Event::CompactionFailed`] and leaves the history as it was.
    pub(super) async fn compact(
        &mut self,
        trigger: CompactTrigger,
        ui: &UnboundedSender<Event>,
        cancel: &CancellationToken,
    ) -> anyhow::Result<Compaction> {
        let b = self
            .budget
            .clone()
            .unwrap_or_else(|| Budget::new(None, 1.0));
        // When the provider refused the request as too long, the window it
        // was measured against is wrong: keep only the last turn.
        let keep = match b.window() {
            Some(w) if trigger != CompactTrigger::ContextLength => {
                b.bytes_for((f64::from(w) * KEEP_SHARE) as u32)
            }
            _ => 0,
        };
        self.history_sizes();
        let Some(cut) = cut_point_sized(&self.history, &self.sizes, keep) else {
            return self.compaction_failed(
                ui,
                "there is nothing older than the last turn to summarise; the history is unchanged",
            );
        };
        // `before_compact` hooks may keep the history as it is.
        let mut out = super::Out {
            log: &mut self.log,
            ui,
        };
        let hooked = self
            .options
            .hooks
            .pre_compact(trigger == CompactTrigger::Manual, cut as u32, &mut out)
            .await?;
        if let Some(why) = hooked.blocked {
            return self.compaction_failed(
                ui,
                &format!("a before_compact hook kept the history as it is: {why}"),
            );
        }
        let before = b.estimate(self.sizes.iter().sum());
        let mut request = summary_request(&self.effective_model(), &self.history[..cut], &b);
        // What `before_compact` hooks added is guidance for the summary.
        if let Some(guidance) = hooked.context_text()
            && let Some(Message::User { text }) = request.messages.last_mut()
        {
            text.push_str("\n\nGuidance for the summary:\n");
            text.push_str(&guidance);
        }
        let (tx, mut rx) = tokio::sync::mpsc::channel(crate::runtime::EVENT_CHANNEL_CAPACITY);
        let provider = self.provider.clone();
        let call = provider.complete(&request, tx);
        tokio::pin!(call);
        // Kept only for a cassette: a provider streaming without end would
        // otherwise fill the host's memory here.
        let record = self.options.record;
        let mut events: Vec<StreamEvent> = Vec::new();
        let result = loop {
            tokio::select! {
                biased;
                () = cancel.cancelled() => return Ok(Compaction::Interrupted),
                Some(ev) = rx.recv() => if record { events.push(ev) },
                res = &mut call => break res,
            }
        };
        while let Ok(ev) = rx.try_recv() {
            if record {
                events.push(ev);
            }
        }
        let response: ChatResponse = match result {
            Ok(r) => r,
            Err(e) => {
                return self.compaction_failed(
                    ui,
                    &format!("the summary request failed ({e}); the history is unchanged"),
                );
            }
        };
        if self.options.record {
            let mut turn = super::cassette::turn(&events, &response);
            turn.summary = true;
            self.recorded.push(turn);
        }
        let summary = response.message.text.trim().to_owned();
        if summary.is_empty() {
            return self.compaction_failed(
                ui,
                "the model answered the summary request with no text; the history is unchanged",
            );
        }
        // The plan is kept across compaction: the summary carries it as it
        // stands, and the summary is what the log keeps and replays.
        let summary = match plan_text(&self.plan) {
            Some(plan) => format!("{summary}\n\n{plan}"),
            None => summary,
        };
        apply(&mut self.history, cut, &summary);
        self.sizes.clear();
        let after = b.estimate(self.history_sizes().iter().sum());
        self.emit(
            ui,
            Event::Compacted {
                summary,
                replaced: cut,
                kept: self.history.len() - 1,
                trigger,
                tokens_before: before,
                tokens_after: after,
            },
        )?;
        Ok(Compaction::Done)
    }

    fn compaction_failed(
        &mut self,
        ui: &UnboundedSender<Event>,
        message: &str,
    ) -> anyhow::Result<Compaction> {
        let mut out = Out {
            log: &mut self.log,
            ui,
        };
        out.emit(Event::CompactionFailed {
            message: message.to_owned(),
        })?;
        Ok(Compaction::Failed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{AssistantMessage, ToolCall, ToolResult};
    use pretty_assertions::assert_eq;

    fn turn(i: usize, output: usize) -> Vec<Message> {
        vec![
            Message::Assistant(AssistantMessage {
                text: Default::default(),
                tool_calls: vec![ToolCall {
                    id: format!("c{i}"),
                    name: "read_file".into(),
                    arguments: "{}".into(),
                    model_id: None,
                }],
            }),
            Message::ToolResult(ToolResult {
                call_id: format!("c{i}"),
                content: "x".repeat(output),
                is_error: false,
            }),
        ]
    }

    #[test]
    fn the_cut_keeps_calls_with_their_results_and_fits_the_keep_share() {
        let mut h = vec![Message::User { text: "go".into() }];
        for i in 0..10 {
            h.extend(turn(i, 1000));
        }
        let cut = cut_point(&h, 3500).unwrap();
        assert!(matches!(h[cut], Message::Assistant(_)));
        // Three turns of ~1.1 KB fit in 3.5 KB, four do not.
        assert_eq!(h.len() - cut, 6);
        apply(&mut h, cut, "s");
        assert_eq!(h.len(), 7);
        assert!(matches!(&h[0], Message::User { text } if text.starts_with(SUMMARY_MESSAGE_MARK)));
        // A summary followed by one turn has nothing left to summarise.
        let mut short = vec![summary_message("s")];
        short.extend(turn(0, 10));
        assert_eq!(cut_point(&short, 0), None);
    }

    #[test]
    fn resume_calibrates_from_the_last_counted_request() {
        let rec = |event| crate::log::Record {
            seq: 0,
            ts_ms: 0,
            event,
        };
        let context = |bytes| Event::Context {
            tokens: 0,
            bytes,
            window: None,
            share: None,
        };
        let end = |input_tokens| Event::RequestEnd {
            message: AssistantMessage::default(),
            finish_reason: crate::protocol::FinishReason::Stop,
            usage: Some(crate::protocol::Usage {
                input_tokens,
                output_tokens: 1,
            }),
        };
        let log = [
            rec(context(4000)),
            rec(end(1000)),
            // A count no tokenizer gives is ignored, as it was live.
            rec(context(4000)),
            rec(end(5)),
        ];
        assert_eq!(last_calibration(&log), Some((4000, 1000)));
        let changed = [
            rec(context(4000)),
            rec(end(1000)),
            rec(Event::ModelChanged { model: "m".into() }),
        ];
        assert_eq!(last_calibration(&changed), None);
    }

    #[test]
    fn a_cassette_can_tell_the_summary_request() {
        assert!(SUMMARY_PROMPT.starts_with(corral_sdk::cassette::SUMMARY_REQUEST_MARK));
    }

    #[test]
    fn the_transcript_fits_its_room() {
        let mut h = vec![Message::User { text: "go".into() }];
        for i in 0..20 {
            h.extend(turn(i, 5000));
        }
        let t = transcript(&h, Some(20_000));
        assert!(t.len() <= 20_000, "{}", t.len());
        assert!(t.contains("[tool call c19 read_file]"));
        assert!(t.contains("bytes left out"));
        assert_eq!(transcript(&h[..1], Some(100)), "[user]\ngo\n");
    }

    #[test]
    fn a_transcript_of_more_messages_than_its_room_holds_keeps_the_task_and_the_newest() {
        // 200k events' worth of turns: their headings alone are megabytes.
        let mut h = vec![Message::User {
            text: "the task".into(),
        }];
        for i in 0..70_000 {
            h.extend(turn(i, 300));
        }
        let room = 300_000;
        let t = transcript(&h, Some(room));
        assert!(t.len() <= room, "{}", t.len());
        assert!(t.starts_with("[user]\nthe task\n"), "{}", &t[..100]);
        assert!(t.contains("earlier entries left out"));
        assert!(t.contains("[tool call c69999 read_file]"));
    }
}
