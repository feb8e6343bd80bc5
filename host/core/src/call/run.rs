//! Step 7, `run`: an admitted call runs: a plugin's tool in its sandbox and
//! an MCP tool at its server, from here ([`sandbox`]); a host tool through
//! the caller's [`Runner`]. What the call touched comes back with its
//! outcome, for step 8 to label.

use super::{CallOutcome, Checked, Dispatcher, Target};
use crate::checkpoint::{Before, Watch};
use crate::protocol::{Event, Label, ToolCall};
use crate::runtime::{ToolError, Touched};
use futures::future::BoxFuture;
use std::sync::Arc;

/// What a call's run gave: its outcome and what it touched.
pub(super) struct Done {
    /// What became of the call.
    pub outcome: CallOutcome,
    /// The files and hosts it touched, for its labels.
    pub touched: Touched,
    /// Labels its runner gives besides (a host tool's own content).
    pub labels: Vec<Label>,
}

impl Dispatcher {
    /// Runs one admitted call where its target runs it.
    pub(super) async fn run(&self, checked: &Checked, runner: &dyn Runner) -> Done {
        match checked.target {
            Target::Host => {
                let outcome = runner.run(checked).await;
                let (touched, labels) = runner.provenance(checked, &outcome);
                Done {
                    outcome,
                    touched,
                    labels,
                }
            }
            Target::Plugin(_) | Target::Mcp(_) => {
                let (outcome, touched) = sandbox(checked).await;
                Done {
                    outcome,
                    touched,
                    labels: Vec::new(),
                }
            }
        }
    }
}

/// How the host's own tools of a batch run, and what the caller does around
/// the calls: the loop runs its host tools and subagents; the MCP server and
/// `tool call` have none ([`PluginRunner`]).
pub trait Runner: Sync {
    /// Runs one admitted call of a host tool.
    fn run<'a>(&'a self, checked: &'a Checked) -> BoxFuture<'a, CallOutcome>;

    /// Waits for what the calls of a group started and left running (a
    /// subagent writes its own stop when interrupted), before their ends
    /// are logged.
    fn settle(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }

    /// What an interrupted call ended with, when the runner knows better
    /// than "interrupted" (a subagent may say where its changes went).
    fn interrupted(&self, _call_id: &str) -> Option<CallOutcome> {
        None
    }

    /// Where the content of a host tool's `outcome` came from: the files it
    /// read, labelled as any tool's reads are, and labels of its own (the
    /// `skill` tool reads the user's own skills). Nothing by default.
    fn provenance(&self, _checked: &Checked, _outcome: &CallOutcome) -> (Touched, Vec<Label>) {
        (Touched::default(), Vec::new())
    }

    /// An event to log after the call's end, from the outcome the tool
    /// gave: the loop logs the plan an `update_plan` set.
    fn note(&self, _call: &ToolCall, _outcome: &CallOutcome) -> Option<Event> {
        None
    }
}

/// No host tools: a host tool, which needs a session, fails.
#[derive(Debug, Default, Clone, Copy)]
pub struct PluginRunner;

impl Runner for PluginRunner {
    fn run<'a>(&'a self, checked: &'a Checked) -> BoxFuture<'a, CallOutcome> {
        let name = checked.call.name.clone();
        Box::pin(async move {
            CallOutcome::Failed(format!(
                "`{name}` is the host's own tool and runs only in a session"
            ))
        })
    }
}

/// The call in its plugin's sandbox or at its MCP server, and what it
/// touched; what it changed where `write-files` does not see (a program,
/// an MCP server) is recorded for undo.
pub async fn sandbox(checked: &Checked) -> (CallOutcome, Touched) {
    let Some(watch) = checked.watched() else {
        return unwatched(checked).await;
    };
    let mut watched = Watched {
        before: Some(watch.before().await),
        watch: watch.clone(),
    };
    let (mut outcome, touched) = unwatched(checked).await;
    if let Some(before) = watched.before.take()
        && let Some(note) = watch.after(before).await
    {
        match &mut outcome {
            CallOutcome::Output { content, .. } | CallOutcome::Failed(content) => {
                content.push_str(&format!("\n\n[corral: {note}]"));
            }
            _ => {}
        }
    }
    (outcome, touched)
}

/// A watched call in flight: when it is dropped before its end (the user
/// interrupted it), what it changed until then is still recorded.
struct Watched {
    watch: Arc<Watch>,
    before: Option<Before>,
}

impl Drop for Watched {
    fn drop(&mut self) {
        let Some(before) = self.before.take() else {
            return;
        };
        let watch = self.watch.clone();
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn_blocking(move || watch.after_blocking(before));
            }
            Err(_) => {
                watch.after_blocking(before);
            }
        }
    }
}

async fn unwatched(checked: &Checked) -> (CallOutcome, Touched) {
    let call = &checked.call;
    let plugin = match &checked.target {
        Target::Plugin(plugin) => plugin,
        Target::Mcp(tool) => {
            let outcome = match tool.call(&checked.args).await {
                Ok((content, is_error, data)) => CallOutcome::Output {
                    content,
                    is_error,
                    data,
                },
                Err(why) => CallOutcome::Failed(why.to_string()),
            };
            return (outcome, Touched::default());
        }
        Target::Host => {
            let outcome = CallOutcome::Failed(format!(
                "`{}` is the host's own tool and runs only in a session",
                call.name
            ));
            return (outcome, Touched::default());
        }
    };
    let widened = checked.widened.iter().cloned().collect();
    let run = plugin.call_touched(&call.name, &call.arguments, &call.id, widened);
    let (result, touched) = match &checked.checkpoint {
        Some(checkpoint) => crate::runtime::checkpoint_scope(checkpoint.clone(), run).await,
        None => run.await,
    };
    let outcome = match result {
        Ok(out) => CallOutcome::Output {
            content: out.content,
            is_error: out.is_error,
            data: out.data,
        },
        Err(ToolError::Fatal(m)) => CallOutcome::Fatal(m),
        Err(e) => CallOutcome::Failed(e.to_string()),
    };
    (outcome, touched)
}
