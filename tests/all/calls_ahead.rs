//! While a session waits for the model, each tool plugin it called before
//! makes the instance of its next call, off that call's path. Each instance
//! still serves exactly one call: nothing an earlier call left in memory is
//! there, and the deadline starts with the call that takes it, however long
//! the instance waited.

use crate::support::manifest::{KEYS, both_providers};
use crate::support::mock::{Call, MockServer, Reply, openai_sse, openai_tool_result};
use crate::support::output::{json_events, stderr};
use crate::support::served::Served;
use crate::support::text::has;
use crate::*;
use corral_test_programs::ADVERSARY;
use serde_json::json;
use std::time::Duration;

/// Longer than the plugin's deadline (1500 ms): an instance made when the
/// model started answering waits past it before its call comes.
const THINKING: Duration = Duration::from_millis(1700);

/// A streamed answer that says a word, pauses for [`THINKING`], then makes
/// `call`.
fn thinking_then(call: Call) -> Reply {
    let body = openai_sse("Thinking. ", &[call]);
    // The role's event, then the word's: the pause comes after both.
    let text = String::from_utf8_lossy(&body);
    let at = text
        .match_indices("\n\n")
        .nth(1)
        .map_or(body.len(), |(i, _)| i + 2);
    Reply::SsePaused(body, at, THINKING)
}

#[test]
fn an_instance_made_while_the_model_answers_serves_one_call_with_its_own_deadline() {
    let mark = |id| {
        (
            id,
            "mark_memory",
            json!({"key": 9, "mib": 8, "plant": false}),
        )
    };
    let scan = |id| {
        (
            id,
            "scan_memory",
            json!({"key": 9, "mib": 16, "plant": false}),
        )
    };
    // The first call makes its instance as before (nothing was loaded);
    // each later one comes after the model paused mid-answer.
    let script: Vec<Call> = vec![
        mark("m1"),
        scan("s1"),
        mark("m2"),
        scan("s2"),
        ("spin", "spin", json!({})),
        (
            "control",
            "scan_memory",
            json!({"key": 9, "mib": 1, "plant": true}),
        ),
    ];
    let turns = script.clone();
    let openai = MockServer::start(move |n, _| match turns.get(n) {
        Some(call) if n == 0 => Reply::Sse(openai_sse("", std::slice::from_ref(call))),
        Some(call) => thinking_then(call.clone()),
        None => Reply::Sse(openai_sse("Done.", &[])),
    });
    let sb = Sandbox::with_manifest(&both_providers(
        openai.port,
        9,
        &format!("[plugins.adversary]\nsource = {ADVERSARY:?}\nlimits = {{ timeout_ms = 1500 }}\n"),
    ));
    let cli = Cli::new();
    let mut env = KEYS.to_vec();
    env.push(("CORRAL_LOG", "warn,corral_runtime::sandbox=debug"));
    let o = cli.run_env(
        &sb.ws(),
        &["run", "--provider", "openai", "--json", "go"],
        &env,
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let reqs = openai.requests();
    assert_eq!(reqs.len(), script.len() + 1, "{err}");
    let result = |i: usize| openai_tool_result(&reqs[i + 1], script[i].0);
    for i in [0, 2] {
        assert!(result(i).starts_with("wrote"), "{}", result(i));
    }
    // The call after a mark finds none of its marker: its instance is not
    // the one the mark ran in, though it was made while the mark's memory
    // was still fresh in the process.
    for i in [1, 3] {
        assert!(result(i).starts_with("found 0 in"), "{}", result(i));
    }
    // The spin runs until its own deadline, counted from its start, not
    // from when its instance was made (1700 ms before).
    has(&result(4), "timed out after 1500 ms");
    let events = json_events(&o);
    let spin_took = events
        .iter()
        .find(|e| e["type"] == "tool_call_end" && e["name"] == "spin")
        .and_then(|e| e["duration_ms"].as_u64())
        .unwrap_or_else(|| panic!("no end of the spin call: {events:?}"));
    assert!(spin_took >= 1400, "the spin ended after {spin_took} ms");
    // The session goes on, on the instance made after the timed-out call.
    assert!(result(5).starts_with("found 1 in"), "{}", result(5));
    // Every call after the first took an instance made while the model
    // answered (the first loads the plugin's code: a load that described
    // it lets the code go once its tools are cached).
    let taken = err.matches("the call takes an instance made ahead").count();
    assert!(taken >= script.len() - 1, "{taken} calls took one:\n{err}");
}

#[test]
fn mcp_serve_makes_the_next_instance_after_each_answer_and_each_serves_one_call() {
    let sb = Sandbox::with_manifest(&format!("[plugins.adversary]\nsource = {ADVERSARY:?}\n"));
    let cli = Cli::new();
    let mut served = Served::start_env(
        &cli,
        &sb,
        &[],
        json!({}),
        &[("CORRAL_LOG", "warn,corral_runtime::sandbox=debug")],
    );
    let mut text = |id: u64, name: &str, mib: u64, plant: bool| {
        let result = served.request(
            id,
            "tools/call",
            json!({"name": name, "arguments": {"key": 9, "mib": mib, "plant": plant}}),
        );
        result["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    // A mark fills its instance's memory with markers; the scan after it
    // runs on the instance made once the mark's answer was written, while
    // the mark's memory was fresh in the process, and finds none of them.
    for round in 0..3 {
        let id = 10 * (round + 1);
        let marked = text(id, "mark_memory", 8, false);
        assert!(marked.starts_with("wrote"), "{marked}");
        let scanned = text(id + 1, "scan_memory", 16, false);
        assert!(scanned.starts_with("found 0 in"), "{scanned}");
    }
    // The scan does find a marker its own instance holds.
    let control = text(99, "scan_memory", 1, true);
    assert!(control.starts_with("found 1 in"), "{control}");
    let log = served.close();
    // Calls took instances made after an answer. Not every one need: a
    // request that arrives while its instance is still being made gets a
    // fresh one on its path, and the one being made waits for the next.
    let taken = log.matches("the call takes an instance made ahead").count();
    assert!(taken >= 1, "no call took an instance made ahead:\n{log}");
}

/// A hook plugin's instances are made while the model answers too, through
/// the binary: each `after_tool` event after the first runs on one, and
/// each instance handles one event (the hook counts the events its
/// instance handled and adds the count to the call's result).
#[test]
fn a_session_makes_hook_instances_ahead_and_each_handles_one_event() {
    let script: Vec<Call> = (0..3)
        .map(|i| {
            (
                ["r0", "r1", "r2"][i],
                "read_file",
                json!({"path": "notes.txt"}),
            )
        })
        .collect();
    let turns = script.clone();
    let openai = MockServer::start(move |n, _| match turns.get(n) {
        Some(call) if n == 0 => Reply::Sse(openai_sse("", std::slice::from_ref(call))),
        Some(call) => thinking_then(call.clone()),
        None => Reply::Sse(openai_sse("Done.", &[])),
    });
    let hook = format!(
        "[plugins.count]\nsource = {:?}\nconfig = {{ mode = \"count\" }}\n\n\
         [hooks]\nafter_tool = [{{ plugin = \"count\" }}]\n",
        corral_test_programs::HOOK
    );
    let sb = Sandbox::with_manifest(&both_providers(openai.port, 9, &hook));
    sb.write("notes.txt", "some notes\n");
    let mut env = KEYS.to_vec();
    env.push(("CORRAL_LOG", "warn,corral_runtime::sandbox=debug"));
    let o = Cli::new().run_env(
        &sb.ws(),
        &["run", "--provider", "openai", "--mode", "full-auto", "go"],
        &env,
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let reqs = openai.requests();
    assert_eq!(reqs.len(), script.len() + 1, "{err}");
    for (i, call) in script.iter().enumerate() {
        let result = openai_tool_result(&reqs[i + 1], call.0);
        has(&result, "some notes");
        has(&result, "[context from hook `count`]\nhandled 1");
    }
    let taken = err
        .lines()
        .filter(|l| {
            l.contains("the call takes an instance made ahead") && l.contains("plugin=count")
        })
        .count();
    assert!(
        taken >= script.len() - 1,
        "{taken} hook events took an instance made ahead:\n{err}"
    );
}
