//! Step 8, `finish`: a call's end. Its result is labelled by where its content came
//! from, shown to the `after_tool` hooks, cut for the model when long (the
//! whole output saved as an artifact), and logged.

use super::run::Done;
use super::{CallOutcome, Dispatcher, Sink};
use crate::protocol::{Effect, Event, Label, LabelKind, ToolCall, ToolOutcome};
use crate::runtime::Touched;

impl Dispatcher {
    /// Labels, hooks, cuts and logs the end of `call`.
    pub(super) async fn finish(
        &self,
        call: &ToolCall,
        done: Done,
        duration_ms: u64,
        sink: &mut dyn Sink,
    ) -> anyhow::Result<ToolOutcome> {
        let Done {
            outcome,
            touched,
            labels: own,
        } = done;
        let labels = self.labels(call, &outcome, &touched, own);
        let outcome = self.after_tool_hooks(call, outcome, &labels, sink).await?;
        let (content, is_error, data) = outcome.into_parts();
        let mut outcome = ToolOutcome {
            content: String::new(),
            is_error,
            data,
            truncated_from: None,
            artifact: None,
            labels,
        };
        outcome.content = self.cut(call, content, &mut outcome, sink)?;
        // Emitted in place and taken back: a sink that keeps nothing of it
        // does not have the whole output (and its data) copied.
        let end = Event::ToolCallEnd {
            call_id: call.id.clone(),
            name: call.name.clone(),
            outcome,
            duration_ms,
        };
        sink.emit_ref(&end)?;
        let Event::ToolCallEnd { outcome, .. } = end else {
            unreachable!("`end` is a call's end, built just above")
        };
        Ok(outcome)
    }

    /// Where the result of `call` came from, taken into the session's
    /// provenance. Labels come from what the call touched, whatever its
    /// outcome: an error text can carry what it read as well as an output
    /// can. They are known before the hooks run, which see sensitive
    /// content only through the guard.
    fn labels(
        &self,
        call: &ToolCall,
        outcome: &CallOutcome,
        touched: &Touched,
        own: Vec<Label>,
    ) -> Vec<Label> {
        let Some(tracker) = &self.tracker else {
            return Vec::new();
        };
        let plugin = self.plugins.plugin_for(&call.name);
        let reads_secrets = plugin.is_some_and(|p| p.decl().reads_secrets.contains(&call.name));
        let mut labels = tracker
            .classifier
            .labels(&call.name, touched, reads_secrets);
        let add = |more: Vec<Label>, labels: &mut Vec<Label>| {
            for label in more {
                if !labels.contains(&label) {
                    labels.push(label);
                }
            }
        };
        add(own, &mut labels);
        // Whatever an MCP server answers is its own content: untrusted;
        // private data too where its entry says so.
        if plugin.is_none()
            && let Some(tool) = self.mcp.get(&call.name)
        {
            let mut more = vec![Label {
                kind: LabelKind::Untrusted,
                source: format!("mcp:{}", tool.server()),
            }];
            if tool.is_sensitive() {
                more.push(Label {
                    kind: LabelKind::Sensitive,
                    source: format!(
                        "output of `{}` (sensitive in [mcp.{}])",
                        call.name,
                        tool.server()
                    ),
                });
            }
            add(more, &mut labels);
        }
        // What a reading tool was asked for may come back from where no
        // file is opened (`git_show HEAD:.env` reads a git object); a
        // result already sensitive by what it opened needs no more.
        let ran = !is_sensitive(&labels)
            && matches!(
                outcome,
                CallOutcome::Output { .. } | CallOutcome::Failed(_) | CallOutcome::Fatal(_)
            );
        let reads = plugin.is_some_and(|p| {
            p.tools()
                .iter()
                .any(|t| t.name == call.name && t.effects.contains(&Effect::Read))
        });
        if ran
            && reads
            && let Ok(args) = serde_json::from_str(&call.arguments)
        {
            let named = tracker.classifier.argument_labels(&call.name, &args, true);
            add(named, &mut labels);
        }
        // A diff can carry a secret file's content with no argument
        // naming it (`git_show HEAD` of a commit that added `.env`).
        if !is_sensitive(&labels)
            && let Some(text) = outcome.text()
        {
            let diff = tracker.classifier.diff_labels(&call.name, text);
            add(diff, &mut labels);
        }
        // A file this session changed is not the user's own: reading it
        // back must not make what was written trusted.
        let changed = self
            .checkpoint
            .as_ref()
            .is_some_and(|c| touched.reads.iter().any(|p| c.changed(p)));
        let taught = match outcome.text() {
            Some(text) => tracker.teach(&labels, &call.name, text, &call.arguments, changed),
            None => crate::provenance::Taught::Nothing,
        };
        tracker.absorb(&labels, taught);
        labels
    }

    /// `content` cut at the output limit, the whole saved as an artifact
    /// that `outcome` then names; as it is when short or nowhere to save.
    fn cut(
        &self,
        call: &ToolCall,
        mut content: String,
        outcome: &mut ToolOutcome,
        sink: &mut dyn Sink,
    ) -> anyhow::Result<String> {
        let Some(limit) = self.output_limit.filter(|l| content.len() > *l) else {
            return Ok(content);
        };
        let Some(saved) = sink.save_artifact(&call.id, &content) else {
            return Ok(content);
        };
        let artifact = anyhow::Context::context(saved, "cannot save a tool artifact")?;
        let whole = content.len();
        let mut cut = limit;
        while !content.is_char_boundary(cut) {
            cut -= 1;
        }
        content.truncate(cut);
        let id = serde_json::to_string(&call.id).unwrap_or_default();
        content.push_str(&format!(
            "\n[output cut at {limit} of {whole} bytes; the whole output is saved: read the rest with \
             read_output {{\"call_id\": {id}, \"offset\": {cut}, \"limit\": {limit}}}, or ask for less]"
        ));
        outcome.truncated_from = Some(whole);
        outcome.artifact = Some(artifact.display().to_string());
        Ok(content)
    }

    /// The `after_tool` hooks of a call that produced an output, or the
    /// `after_tool_failure` hooks of one that failed, ran invalid or failed
    /// fatally: a block withholds the output from the model (the reason
    /// takes its place), context is added after it.
    ///
    /// A result labelled sensitive (`labels`) is withheld from hooks that
    /// could send it out (see [`crate::hooks::Hooks::run_withholding`]),
    /// unless the guard is off.
    async fn after_tool_hooks(
        &self,
        call: &ToolCall,
        outcome: CallOutcome,
        labels: &[Label],
        sink: &mut dyn Sink,
    ) -> anyhow::Result<CallOutcome> {
        use crate::protocol::HookEvent;
        use crate::protocol::HookInput;
        let input = match &outcome {
            CallOutcome::Output {
                content, is_error, ..
            } if self.hooks.has(HookEvent::AfterTool) => HookInput::AfterTool {
                call: call.clone(),
                content: content.clone(),
                is_error: *is_error,
            },
            CallOutcome::Invalid(error)
            | CallOutcome::Failed(error)
            | CallOutcome::Fatal(error)
                if self.hooks.has(HookEvent::AfterToolFailure) =>
            {
                HookInput::AfterToolFailure {
                    call: call.clone(),
                    error: error.clone(),
                }
            }
            _ => return Ok(outcome),
        };
        let sensitive: Vec<String> = match &self.tracker {
            Some(tracker) if tracker.settings.enabled => labels
                .iter()
                .filter(|l| l.kind == LabelKind::Sensitive)
                .map(|l| l.source.clone())
                .collect(),
            _ => Vec::new(),
        };
        let hooked = self.hooks.run_withholding(input, &sensitive, sink).await?;
        Ok(after_tool(outcome, hooked))
    }
}

fn is_sensitive(labels: &[Label]) -> bool {
    labels.iter().any(|l| l.kind == LabelKind::Sensitive)
}

/// What the model reads of a call after its `after_tool` (or
/// `after_tool_failure`) hooks: a block withholds the output, and the
/// reason takes its place; context is added after the output.
fn after_tool(outcome: CallOutcome, hooked: crate::hooks::Outcome) -> CallOutcome {
    if let Some(why) = hooked.blocked {
        return CallOutcome::Output {
            content: format!("{why}\n(the call ran; its output was withheld)"),
            is_error: true,
            data: None,
        };
    }
    let Some(context) = hooked.context_text() else {
        return outcome;
    };
    let add = |text: String| format!("{text}\n\n{context}");
    match outcome {
        CallOutcome::Output {
            content,
            is_error,
            data,
        } => CallOutcome::Output {
            content: add(content),
            is_error,
            data,
        },
        CallOutcome::Invalid(m) => CallOutcome::Invalid(add(m)),
        CallOutcome::Failed(m) => CallOutcome::Failed(add(m)),
        CallOutcome::Fatal(m) => CallOutcome::Fatal(add(m)),
        other => other,
    }
}
