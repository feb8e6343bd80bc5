//! `corral tool call NAME`: one call through the one call pipeline, as a
//! session would take it: its checks, the `before_tool` and `after_tool`
//! hooks, protected paths, the policy, the exfiltration guard and the log
//! (the host log: `CORRAL_LOG=corral::event=debug` shows every event a
//! session would write). The user typed the call, and so approved it: an
//! `ask` is approved by the command line, while deny rules, protected
//! paths, hooks and read-only mode still hold. What it skips: a session
//! log to resume, and the host's own tools (`task`, `update_plan`,
//! `read_output`), which run only in a session.

use super::{EXIT_TOOL_ERROR, fail, inert, out, out_json, with_newline};
use corral_core::call::{CommandLineApprover, Dispatcher, Ended, LogSink};
use corral_core::load::Loaded;
use corral_core::mcp_client::McpTools;
use corral_protocol::ToolCall;
use std::process::ExitCode;
use std::sync::Arc;

/// Calls `name` with `args` (a JSON object, or `@FILE`), printing its
/// output (`json`: as a JSON object).
pub(super) async fn tool_call(
    loaded: &Loaded,
    mcp: McpTools,
    name: &str,
    args: &str,
    json: bool,
) -> ExitCode {
    let args = match arguments(args) {
        Ok(args) => args,
        Err(code) => return code,
    };
    let plugins = &loaded.plugins;
    if let Some(w) = plugins.withheld().iter().find(|w| w.tool == name) {
        return fail(&format!("tool `{name}` is not offered: {}", w.reason));
    }
    if plugins.plugin_for(name).is_none() && mcp.get(name).is_none() {
        return unknown(loaded, &mcp, name);
    }
    let front = match loaded
        .front(Arc::new(CommandLineApprover), Arc::new(mcp), None)
        .await
    {
        Ok(front) => front,
        Err(e) => return fail(&e.to_string()),
    };
    let dispatcher = Dispatcher::of(front);
    let call = ToolCall {
        id: "cli-1".into(),
        name: name.to_owned(),
        arguments: args,
        model_id: None,
    };
    let cancel = tokio_util::sync::CancellationToken::new();
    let mut sink = LogSink;
    // Registered before the call starts: `ctrl_c()` would register on its
    // first poll, and a call whose first poll already started a program
    // would leave a SIGINT in that window to the default action (corral
    // killed, its children left to the kernel).
    let mut interrupt = match super::run::interrupts() {
        Ok(s) => s,
        Err(e) => return fail(&format!("cannot listen for Ctrl-C: {e}")),
    };
    let ran = tokio::select! {
        r = dispatcher.run_alone(&call, &mut sink, &cancel) => r,
        _ = interrupt.recv() => {
            cancel.cancel();
            eprintln!("interrupted: `{name}` was stopped");
            return ExitCode::from(super::run::EXIT_INTERRUPTED);
        }
    };
    let (outcome, ended) = match ran {
        Ok(ran) => ran,
        Err(e) => return fail(&format!("{e:#}")),
    };
    if json {
        let value = match ended {
            Ended::Ran => serde_json::json!({"ok": {
                "content": outcome.content,
                "is_error": outcome.is_error,
                "data": outcome.data,
            }}),
            other => serde_json::json!({"error": {"kind": other, "message": outcome.content}}),
        };
        out_json(&serde_json::to_string_pretty(&value).unwrap_or_default());
    } else {
        match ended {
            Ended::Ran if outcome.is_error => {
                eprint!("{}", inert(&with_newline(&outcome.content)));
            }
            Ended::Ran => out(&outcome.content),
            _ => eprintln!("error: {}: {}", inert(name), inert(&outcome.content)),
        }
    }
    match ended {
        Ended::Ran if !outcome.is_error => ExitCode::SUCCESS,
        Ended::Interrupted => ExitCode::from(super::run::EXIT_INTERRUPTED),
        _ => ExitCode::from(EXIT_TOOL_ERROR),
    }
}

/// The arguments: a JSON object given inline or read from `@FILE` (one
/// command-line argument holds at most 128 KiB on Linux; larger arguments,
/// a whole file's content, come from a file).
fn arguments(args: &str) -> Result<String, ExitCode> {
    let text = match args.strip_prefix('@') {
        Some(path) => std::fs::read_to_string(path).map_err(|e| {
            fail(&format!(
                "--args: cannot read the arguments from {}: {e}",
                inert(path)
            ))
        })?,
        None => args.to_owned(),
    };
    if let Err(e) = serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(&text) {
        return Err(fail(&format!("--args must be a JSON object: {e}")));
    }
    Ok(text)
}

/// The error for a name no plugin or server offers, naming those offered
/// and the servers that did not answer.
fn unknown(loaded: &Loaded, mcp: &McpTools, name: &str) -> ExitCode {
    let known: Vec<String> = loaded
        .plugins
        .tools()
        .iter()
        .map(|(_, t)| t.name.clone())
        .chain(mcp.tools().iter().map(|t| t.spec.name.clone()))
        .collect();
    let mut also = String::new();
    for (server, why) in mcp.unanswered().iter().chain(mcp.failed()) {
        also.push_str(&format!("\n[mcp.{server}]: {}", inert(why)));
    }
    fail(&format!(
        "no tool named `{name}`; available: {}{also}",
        known.join(", ")
    ))
}
