//! Runtime benchmarks, printed as ratios measured in the same run.
//!
//! `cargo bench -p corral --bench runtime`
//!
//! 1. Per-call cost of a trivial sandboxed tool (`word_count` of the SDK
//!    example plugin on a small file, fresh store and instance per call)
//!    against the same function called natively, and against spawning a
//!    process per call (`wc -w`, the same job).
//! 2. `grep` over a generated tree inside the sandbox against the same search
//!    code (`corral_plugin_search::grep`) compiled natively. In the sandbox
//!    the plugin lists directories and reads files through corral's `files`
//!    interface; natively through `std::fs`, the searcher reading each file
//!    itself. Both walk the tree with the same code and must print the same
//!    matches.

mod common;

use common::{load, report};
use corral::runtime::{Runtime, RuntimeOptions};
use corral_sdk::Tool as _;
use std::path::Path;
use std::time::{Duration, Instant};

/// Median of `rounds` timings of `iters` runs of `f`, per run.
fn measure(rounds: usize, iters: usize, mut f: impl FnMut()) -> Duration {
    let mut samples: Vec<Duration> = (0..rounds)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..iters {
                f();
            }
            t.elapsed() / iters as u32
        })
        .collect();
    samples.sort();
    samples[rounds / 2]
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let cache = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let runtime = Runtime::new(RuntimeOptions {
        cache_dir: Some(cache.path().to_path_buf()),
    })
    .unwrap_or_else(|e| panic!("{e}"));

    // ---- 1. per-call overhead ----
    let ws = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(ws.path().join("small.txt"), "one two three four five\n")
        .unwrap_or_else(|e| panic!("{e}"));
    let example = format!(
        "[plugins.example]\nsource = {:?}\ngrants.fs = [{{ path = \".\", access = \"ro\" }}]\n",
        corral_test_programs::EXAMPLE
    );
    let plugins = load(&rt, &runtime, ws.path(), &example);
    let args = r#"{"path":"small.txt"}"#;
    let check = rt
        .block_on(plugins.call("word_count", args, "b"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(check.content, "5");
    let sandboxed = measure(15, 400, || {
        let out = rt.block_on(plugins.call("word_count", args, "b"));
        assert!(out.is_ok());
    });

    std::env::set_current_dir(ws.path()).unwrap_or_else(|e| panic!("{e}"));
    let native = measure(15, 4000, || {
        let parsed: corral_plugin_example::Args =
            serde_json::from_str(args).unwrap_or_else(|e| panic!("{e}"));
        let out = corral_plugin_example::WordCount::run(parsed);
        assert!(out.is_ok_and(|o| o.content == "5"));
    });
    let spawn = measure(5, 40, || {
        let out = std::process::Command::new("wc")
            .args(["-w", "small.txt"])
            .output();
        assert!(out.is_ok_and(|o| o.status.success()));
    });
    let overhead = sandboxed.saturating_sub(native);
    report("trivial tool (word_count on a 5-word file), per call:");
    report(&format!("  native function        {:>10.2?}", native));
    report(&format!(
        "  sandboxed (fresh inst.) {:>10.2?}   overhead {:.1?} (target <= 100 µs)",
        sandboxed, overhead
    ));
    report(&format!("  process spawn (wc -w)  {:>10.2?}", spawn));
    report(&format!(
        "  sandboxed/native = {:.1}x   spawn/sandboxed = {:.1}x (target >= 20x)",
        sandboxed.as_secs_f64() / native.as_secs_f64(),
        spawn.as_secs_f64() / sandboxed.as_secs_f64()
    ));

    // ---- 2. grep over a large tree ----
    let tree = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (files, bytes) = make_tree(tree.path());
    let plugins = load(&rt, &runtime, tree.path(), "");
    let grep_args = r#"{"pattern":"needle_[0-9]+x","max_results":100000}"#;
    let sandboxed_out = rt
        .block_on(plugins.call("grep", grep_args, "g"))
        .unwrap_or_else(|e| panic!("{e}"));
    std::env::set_current_dir(tree.path()).unwrap_or_else(|e| panic!("{e}"));
    let parsed = || -> corral_plugin_search::GrepArgs {
        serde_json::from_str(grep_args).unwrap_or_else(|e| panic!("{e}"))
    };
    let native_out = corral_plugin_search::grep(&parsed()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        sandboxed_out.content, native_out.content,
        "sandboxed and native grep disagree"
    );
    let sandboxed = measure(11, 5, || {
        assert!(rt.block_on(plugins.call("grep", grep_args, "g")).is_ok());
    });
    let native = measure(11, 5, || {
        assert!(corral_plugin_search::grep(&parsed()).is_ok());
    });
    report(&format!(
        "grep over {files} files ({:.1} MiB), {} matches:",
        bytes as f64 / (1 << 20) as f64,
        native_out.content.lines().count()
    ));
    report(&format!("  native                 {:>10.2?}", native));
    report(&format!("  sandboxed              {:>10.2?}", sandboxed));
    let glob_args = r#"{"pattern":"**/*.rs","limit":100000}"#;
    let gs = measure(15, 1, || {
        assert!(rt.block_on(plugins.call("glob", glob_args, "g")).is_ok());
    });
    let gn = measure(15, 1, || {
        let a: corral_plugin_search::GlobArgs =
            serde_json::from_str(glob_args).unwrap_or_else(|e| panic!("{e}"));
        assert!(corral_plugin_search::Glob::run(a).is_ok());
    });
    report(&format!(
        "  (walk only: native {gn:.2?}, sandboxed {gs:.2?})"
    ));
    report(&format!(
        "  sandboxed/native = {:.2}x (target <= 2x)",
        sandboxed.as_secs_f64() / native.as_secs_f64()
    ));
}

/// A source-like tree: 40 directories of 50 files of 200 lines; one line in
/// every 7th file is a match.
fn make_tree(root: &Path) -> (usize, usize) {
    let mut files = 0;
    let mut bytes = 0;
    for d in 0..40 {
        let dir = root.join(format!("mod_{d}"));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        for f in 0..50 {
            let mut text = String::new();
            for l in 0..200 {
                text.push_str(&format!(
                    "    let value_{l} = compute(input_{f}, {d}) + offset; // line {l}\n"
                ));
            }
            if (d * 50 + f) % 7 == 0 {
                text.push_str(&format!("    // needle_{f}x marks the spot\n"));
            }
            bytes += text.len();
            files += 1;
            std::fs::write(dir.join(format!("file_{f}.rs")), text)
                .unwrap_or_else(|e| panic!("{e}"));
        }
    }
    (files, bytes)
}
