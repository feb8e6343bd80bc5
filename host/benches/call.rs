//! The cost of one sandboxed call, against what a user would do instead.
//!
//! `cargo bench -p corral --bench call`
//!
//! 1. A trivial sandboxed call: `word_count` of the SDK example plugin on a
//!    5-word file, each call a fresh store and instance, called, dropped
//!    (`Plugins::call`, what every tool call pays), against spawning
//!    `wc -w` on the same file, the process a user would run instead.
//!    Rounds of the two alternate, so noise from the machine falls on both
//!    alike; the figures are medians of the rounds.
//! 2. A trivial `before_tool` hook (the test hook answering `continue`)
//!    against the cheapest call it guards (`read_file` of a small file),
//!    each through the dispatcher's whole path, rounds alternating; the
//!    hook's cost is the difference of the medians.

mod common;

use common::{load, report};
use corral_core::call::Dispatcher;
use corral_core::hooks::Hooks;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

use common::or_die;

/// Time per run of `iters` runs of `f`.
fn round(iters: usize, mut f: impl FnMut()) -> Duration {
    let t = Instant::now();
    for _ in 0..iters {
        f();
    }
    t.elapsed() / iters as u32
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let (rt, _cache, runtime) = common::engine();
    let ws = common::small_workspace();
    let extra = format!(
        "[plugins.example]\nsource = {:?}\ngrants.fs = [{{ path = \".\", access = \"ro\" }}]\n\n\
         [plugins.trivial]\nsource = {:?}\nconfig = {{ mode = \"continue\" }}\n\n\
         [hooks]\nbefore_tool = [{{ plugin = \"trivial\" }}]\n",
        corral_test_programs::EXAMPLE,
        corral_test_programs::HOOK
    );
    let plugins = Arc::new(load(&rt, &runtime, ws.path(), &extra));

    // ---- 1. trivial call vs a process ----
    let args = r#"{"path":"small.txt"}"#;
    let check = or_die(rt.block_on(plugins.call("word_count", args, "b")));
    assert_eq!(check.content, "5");
    let small = ws.path().join("small.txt");
    let mut call = || {
        let out = rt.block_on(plugins.call("word_count", args, "b"));
        assert!(out.is_ok());
    };
    let spawn = || {
        let out = std::process::Command::new("wc")
            .arg("-w")
            .arg(&small)
            .output();
        assert!(out.is_ok_and(|o| o.status.success()));
    };
    round(200, &mut call);
    // `CALL_BENCH_PROFILE=N`: only N calls, for a profiler to look at.
    if let Some(n) = std::env::var("CALL_BENCH_PROFILE")
        .ok()
        .and_then(|n| n.parse().ok())
    {
        report(&format!("{n} calls: {:.2?} each", round(n, &mut call)));
        return;
    }
    let (mut calls, mut spawns) = (Vec::new(), Vec::new());
    for _ in 0..15 {
        calls.push(round(400, &mut call));
        spawns.push(round(20, spawn));
    }
    let (sandboxed, spawned) = (median(calls), median(spawns));
    report(
        "trivial sandboxed call (word_count of a 5-word file, fresh store + instance + call + drop):",
    );
    report(&format!(
        "  sandboxed call         {sandboxed:>10.2?}   (goal <= 10 µs)"
    ));
    report(&format!("  process spawn (wc -w)  {spawned:>10.2?}"));
    report(&format!(
        "  spawn / sandboxed      {:>10.1}x  (goal >= 100x)",
        spawned.as_secs_f64() / sandboxed.as_secs_f64()
    ));

    // ---- 2. a trivial before_tool hook vs the call it guards ----
    let manifest = common::manifest(ws.path(), &extra);
    let hooks = Arc::new(or_die(rt.block_on(Hooks::new(&manifest.hooks, &plugins))));
    let (plain, hooked) = common::plain_and_hooked(plugins, hooks);
    let read = common::read_small();
    let cancel = CancellationToken::new();
    let dispatch = |d: &Dispatcher| {
        let outcome = or_die(rt.block_on(d.run_one(&read, &mut common::Discard, &cancel)));
        assert!(!outcome.is_error, "{}", outcome.content);
    };
    round(50, || dispatch(&plain));
    round(50, || dispatch(&hooked));
    let (mut base, mut with) = (Vec::new(), Vec::new());
    for _ in 0..15 {
        base.push(round(200, || dispatch(&plain)));
        with.push(round(200, || dispatch(&hooked)));
    }
    let (base, with) = (median(base), median(with));
    let hook = with.saturating_sub(base);
    report(
        "before_tool hook (trivial Rust hook) guarding read_file of a 24-byte file, events dropped:",
    );
    report(&format!("  call without the hook  {base:>10.2?}"));
    report(&format!("  call with the hook     {with:>10.2?}"));
    report(&format!(
        "  hook / guarded call    {:>10.2}   (goal <= 0.3)",
        hook.as_secs_f64() / base.as_secs_f64()
    ));
}
