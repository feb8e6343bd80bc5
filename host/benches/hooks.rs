//! The cost of a hook, printed as figures and a ratio from one run.
//!
//! `cargo bench -p corral --bench hooks`
//!
//! A trivial Rust `before_tool` hook (the test hook answering `continue`)
//! guards `read_file` of a small file, the cheapest call a hook can guard,
//! and `run_command` of `true`, the kind of call a command guard is for.
//! Each call takes the dispatcher's whole path (validation, hooks, policy,
//! sandboxed call, result events); the same calls without the hook are the
//! baseline. The hook's cost is the difference, reported per call and as a
//! ratio to the unguarded call; target: under 0.5. Each is measured twice:
//! with the events dropped (the dispatcher alone, the strictest ratio) and
//! with them written to a session log as a session does (the permission and
//! the result reach the disk before the session goes on).

mod common;

use common::{load, report};
use corral_core::call::{Dispatcher, Sink};
use corral_core::hooks::Hooks;
use corral_core::log::SessionLog;
use corral_protocol::{Event, ToolCall};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

use common::or_die;

/// Where the events of a measured call go.
enum Events {
    /// Dropped: the dispatcher's path alone.
    Discard,
    /// Written to a session log, durable ones synced, as in a session.
    Log(SessionLog),
}

impl corral_core::hooks::Emit for Events {
    fn emit(&mut self, event: Event) -> anyhow::Result<()> {
        if let Events::Log(log) = self
            && event.is_logged()
        {
            log.append(&event, event.is_durable())?;
        }
        Ok(())
    }
}

impl Sink for Events {
    fn save_artifact(&self, _: &str, _: &str) -> Option<std::io::Result<PathBuf>> {
        None
    }
}

/// Median time per call of `call` over `rounds` rounds of `iters` calls.
fn measure(
    rt: &tokio::runtime::Runtime,
    dispatcher: &Dispatcher,
    sink: &mut Events,
    call: &ToolCall,
    rounds: usize,
    iters: usize,
) -> Duration {
    let cancel = CancellationToken::new();
    let mut times: Vec<Duration> = (0..rounds)
        .map(|_| {
            let started = Instant::now();
            for _ in 0..iters {
                let outcome = or_die(rt.block_on(dispatcher.run_one(call, sink, &cancel)));
                assert!(!outcome.is_error, "{}", outcome.content);
            }
            started.elapsed() / iters as u32
        })
        .collect();
    times.sort();
    times[rounds / 2]
}

fn main() {
    let (rt, _cache, runtime) = common::engine();
    let ws = common::small_workspace();
    let hook = format!(
        "[plugins.trivial]\nsource = {:?}\nconfig = {{ mode = \"continue\" }}\n\n\
         [hooks]\nbefore_tool = [{{ plugin = \"trivial\" }}]\n",
        corral_test_programs::HOOK
    );
    let manifest = common::manifest(ws.path(), &hook);
    let plugins = Arc::new(load(&rt, &runtime, ws.path(), &hook));
    let hooks = Arc::new(or_die(rt.block_on(Hooks::new(&manifest.hooks, &plugins))));
    let (plain, hooked) = common::plain_and_hooked(plugins, hooks);

    let read = common::read_small();
    compare(
        &rt,
        &plain,
        &hooked,
        &read,
        "read_file of a 24-byte file (the cheapest guarded call)",
        (9, 200),
    );
    let command = ToolCall {
        id: "b".into(),
        name: "run_command".into(),
        arguments: r#"{"argv":["true"]}"#.into(),
        model_id: None,
    };
    compare(
        &rt,
        &plain,
        &hooked,
        &command,
        "run_command `true` (what a command guard guards)",
        (5, 20),
    );
}

/// Measures `call` without and with the hook, interleaved so that noise
/// from the machine falls on both alike, and reports the hook's share: once
/// with the events dropped, once with them in a session log.
fn compare(
    rt: &tokio::runtime::Runtime,
    plain: &Dispatcher,
    hooked: &Dispatcher,
    call: &ToolCall,
    what: &str,
    (rounds, iters): (usize, usize),
) {
    let logs = or_die(tempfile::tempdir());
    for logged in [false, true] {
        let mut sink = if logged {
            Events::Log(or_die(SessionLog::create(logs.path())))
        } else {
            Events::Discard
        };
        // Warm both paths: compile, first instances, caches.
        measure(rt, plain, &mut sink, call, 1, iters.min(20));
        measure(rt, hooked, &mut sink, call, 1, iters.min(20));
        let mut base = Vec::new();
        let mut with = Vec::new();
        for _ in 0..3 {
            base.push(measure(rt, plain, &mut sink, call, rounds, iters));
            with.push(measure(rt, hooked, &mut sink, call, rounds, iters));
        }
        base.sort();
        with.sort();
        let (base, with) = (base[1], with[1]);
        let hook = with.saturating_sub(base);
        let ratio = hook.as_secs_f64() / base.as_secs_f64();
        report(&format!(
            "before_tool hook (trivial Rust hook) guarding {what}, events {}:",
            if logged {
                "written to a session log"
            } else {
                "dropped"
            }
        ));
        report(&format!("  call without the hook:        {base:>10.1?}"));
        report(&format!("  call with the hook:           {with:>10.1?}"));
        report(&format!("  hook per call:                {hook:>10.1?}"));
        report(&format!(
            "  hook / guarded call:          {ratio:>10.2}  (target < 0.5)"
        ));
    }
}
