//! Projects whose replay provider scripts a parent and its subagents, and
//! the logs they leave.

use crate::support::log::all_events;
use crate::*;
use serde_json::Value;

/// A project whose replay provider plays `c.cassette.json`, in `mode`.
pub fn project(sb: &Sandbox, mode: &str, delay_ms: u64, turns: Value, agents: Value) {
    sb.write(
        "corral.toml",
        &format!(
            "[agent]\nprovider = \"replay\"\n\n[policy]\nmode = \"{mode}\"\n\n\
             [plugins.replay]\nsource = \"builtin:replay\"\n\
             grants.fs = [{{ path = \".\", access = \"ro\" }}]\n\
             config = {{ cassette = \"c.cassette.json\", delay_ms = {delay_ms} }}\n\
             limits = {{ timeout_ms = 120000 }}\n"
        ),
    );
    crate::support::cassette::write_with_agents(sb, "c.cassette.json", &turns, &agents);
}

/// The parent's log and its children's, by the call that started each.
pub fn family(cli: &Cli) -> (Vec<Value>, Vec<(String, Vec<Value>)>) {
    let mut parent = None;
    let mut children = Vec::new();
    for log in all_events(cli) {
        match log.iter().find(|e| e["type"] == "subagent_started") {
            Some(linked) => children.push((
                linked["parent_call"].as_str().expect("call").to_owned(),
                log.clone(),
            )),
            None => parent = Some(log),
        }
    }
    children.sort_by(|a, b| a.0.cmp(&b.0));
    (parent.expect("the parent's log"), children)
}
