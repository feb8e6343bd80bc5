//! The `corral plugin` commands run as a user runs them: the compile cache
//! (bounded by least recent use, shown, pruned and cleared by `corral plugin
//! cache`) with a cache directory of its own per test, and the crash report
//! `corral tool call` gives when a plugin panics amid other output.

use crate::support::output::{stderr, stdout};
use crate::support::text::{has, has_all, lacks};
use crate::*;
use corral_test_programs::{BUDGETS, CRASH, ECHO, TRUSTPIN};
use std::collections::BTreeMap;
use std::process::Output;

const BUILTINS: &[&str] = &[
    "fs",
    "search",
    "replay",
    "openai",
    "anthropic",
    "shell",
    "git",
    "web-fetch",
];
const MIB: u64 = 1 << 20;

/// A workspace and a `corral` whose compile cache is its own, not the one
/// the other CLI tests share.
struct Env {
    sb: Sandbox,
    cli: Cli,
    cache_home: tempfile::TempDir,
}

/// A plugin of a test manifest: a built-in one by name, or a guest file.
enum P {
    Builtin(&'static str),
    Guest(&'static str, &'static str),
}

impl Env {
    fn new() -> Self {
        Self {
            sb: Sandbox::new(),
            cli: Cli::new(),
            cache_home: tempfile::tempdir().expect("cache home"),
        }
    }

    fn run(&self, args: &[&str], cap_mb: Option<&str>) -> Output {
        let home = self.cache_home.path().to_str().expect("utf-8 path");
        // Every plugin loaded by each command, as these tests count on:
        // with the description cache a command loads only what it calls.
        // The built-ins go through the compile cache like any plugin
        // instead of coming compiled by the build.
        let mut env = vec![
            ("XDG_CACHE_HOME", home),
            ("CORRAL_TOOL_CACHE", "off"),
            ("CORRAL_PRECOMPILED", "off"),
        ];
        if let Some(cap) = cap_mb {
            env.push(("CORRAL_CACHE_MAX_MB", cap));
        }
        self.cli.run_env(&self.sb.ws(), args, &env)
    }

    /// Loads exactly `plugins` (every other built-in disabled), as `corral
    /// plugin list` does, and returns each plugin's SHA-256 by name.
    fn use_plugins(&self, plugins: &[P], cap_mb: Option<&str>) -> BTreeMap<String, String> {
        let mut toml = String::new();
        for b in BUILTINS {
            if !plugins.iter().any(|p| matches!(p, P::Builtin(n) if n == b)) {
                toml.push_str(&format!("[plugins.{b}]\nenabled = false\n\n"));
            }
        }
        for p in plugins {
            if let P::Guest(name, wasm) = p {
                toml.push_str(&plugin_toml(name, wasm, ""));
            }
        }
        self.sb.write("corral.toml", &toml);
        let o = self.run(&["plugin", "list", "--json"], cap_mb);
        assert!(o.status.success(), "{}", stderr(&o));
        let list: Vec<serde_json::Value> = serde_json::from_str(&stdout(&o)).expect("json");
        list.iter()
            .map(|p| {
                (
                    p["name"].as_str().expect("name").to_owned(),
                    p["sha256"].as_str().expect("sha256").to_owned(),
                )
            })
            .collect()
    }

    /// `corral plugin cache --json`.
    fn cache(&self, cap_mb: Option<&str>) -> serde_json::Value {
        let o = self.run(&["plugin", "cache", "--json"], cap_mb);
        assert!(o.status.success(), "{}", stderr(&o));
        serde_json::from_str(&stdout(&o)).expect("json")
    }
}

/// The SHA-256 of each entry, least recently used first.
fn shas(report: &serde_json::Value) -> Vec<String> {
    report["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| e["sha256"].as_str().expect("sha256").to_owned())
        .collect()
}

fn size_of(report: &serde_json::Value, sha: &str) -> u64 {
    report["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .find(|e| e["sha256"] == sha)
        .and_then(|e| e["bytes"].as_u64())
        .unwrap_or_else(|| panic!("no entry {sha} in {report}"))
}

#[test]
fn least_recently_used_entries_go_first_and_the_cache_ends_under_its_cap() {
    let env = Env::new();
    let small = P::Guest("small", TRUSTPIN);
    let one = env.use_plugins(&[small], None)["small"].clone();
    let fs = env.use_plugins(&[P::Builtin("fs")], None)["fs"].clone();
    let search = env.use_plugins(&[P::Builtin("search")], None)["search"].clone();
    // A hit counts as a use: `small`, stored first, is now the newest.
    env.use_plugins(&[P::Guest("small", TRUSTPIN)], None);
    let report = env.cache(None);
    assert_eq!(shas(&report), [fs.clone(), search.clone(), one.clone()]);
    assert_eq!(report["max_bytes"], 512 * MIB);

    // The size the next entry will take, measured in a cache of its own.
    let scratch = Env::new();
    let next = scratch.use_plugins(&[P::Guest("next", BUDGETS)], None)["next"].clone();
    let next_size = size_of(&scratch.cache(None), &next);
    // A cap that holds the two newest entries but not a built-in beside
    // them: storing the new one must remove both built-ins, oldest first.
    let cap_mb = (size_of(&report, &one) + next_size).div_ceil(MIB);
    for big in [&fs, &search] {
        assert!(
            size_of(&report, big) > MIB,
            "the test needs built-ins of over 1 MiB compiled: {report}"
        );
    }
    let cap = cap_mb.to_string();
    env.use_plugins(&[P::Guest("next", BUDGETS)], Some(&cap));
    let report = env.cache(Some(&cap));
    assert_eq!(shas(&report), [one.clone(), next.clone()]);
    let total = report["total_bytes"].as_u64().expect("total");
    assert!(total <= cap_mb * MIB, "{report}");
    assert_eq!(report["max_bytes"], cap_mb * MIB);

    let o = env.run(&["plugin", "cache"], Some(&cap));
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let dir = env.cache_home.path().join("corral/components");
    has(&text, dir.display().to_string());
    has(&text, "entries        2, ");
    has(&text, format!("of {cap_mb}.0 MiB"));
    assert!(text.contains(&one) && text.contains(&next), "{text}");

    // A pruned component is compiled again on its next use.
    env.sb.write(
        "corral.toml",
        &BUILTINS
            .iter()
            .filter(|b| **b != "fs")
            .map(|b| format!("[plugins.{b}]\nenabled = false\n"))
            .collect::<String>(),
    );
    let o = env.run(&["-v", "plugin", "list"], None);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("compiled ("), "{}", stderr(&o));
    lacks(&stderr(&o), "compile cache hit");
    assert_eq!(shas(&env.cache(None)), [one, next, fs]);

    let o = env.run(&["plugin", "cache", "--clear"], None);
    assert!(o.status.success(), "{}", stderr(&o));
    has(&stdout(&o), "removed 3 entries");
    let report = env.cache(None);
    assert_eq!(shas(&report), Vec::<String>::new());
    assert_eq!(report["total_bytes"], 0);
    assert_eq!(std::fs::read_dir(&dir).expect("dir").count(), 0);
}

#[test]
fn entries_in_use_by_the_process_are_kept_whatever_the_cap() {
    let env = Env::new();
    let old = env.use_plugins(&[P::Guest("old", TRUSTPIN)], None)["old"].clone();
    // A cap of 0 MiB: everything goes except what this run loads.
    let now = env.use_plugins(&[P::Guest("a", ECHO), P::Guest("b", CRASH)], Some("0"));
    let mut kept = shas(&env.cache(None));
    kept.sort();
    let mut want = vec![now["a"].clone(), now["b"].clone()];
    want.sort();
    assert_eq!(kept, want);
    assert!(!kept.contains(&old));

    // `--prune` applies the cap now; nothing of this command is in use.
    let o = env.run(&["plugin", "cache", "--prune", "--json"], Some("0"));
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("json");
    assert_eq!(v["removed"].as_array().expect("removed").len(), 2, "{v}");
    assert_eq!(shas(&v), Vec::<String>::new());
}

#[test]
fn a_bad_cap_is_refused_by_plugin_cache_and_only_warned_about_elsewhere() {
    let env = Env::new();
    let o = env.run(&["plugin", "cache"], Some("lots"));
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    has(
        &err,
        "CORRAL_CACHE_MAX_MB=`lots` is not a whole number of MiB",
    );
    has(&err, "such as 512");
    env.sb.write("corral.toml", "");
    let o = env.run(&["plugin", "list"], Some("lots"));
    assert!(o.status.success(), "{}", stderr(&o));
    has(&stderr(&o), "using the default of 512 MiB");
}

#[test]
fn plugins_is_an_alias_of_plugin() {
    let env = Env::new();
    let singular = env.run(&["plugin", "list", "--json"], None);
    let plural = env.run(&["plugins", "list", "--json"], None);
    assert!(singular.status.success(), "{}", stderr(&singular));
    assert_eq!(stdout(&singular), stdout(&plural));
    let help = stdout(&env.run(&["--help"], None));
    has_all(&help, &["plugin ", "[alias: plugins]"]);
}

#[test]
fn a_panic_amid_other_stderr_is_shown_by_tool_call() {
    let sb = Sandbox::with_manifest(&plugin_toml("crash", CRASH, ""));
    let cli = Cli::new();
    let args = serde_json::json!({
        "before": 30,
        "after": 12,
        "message": "config key `root` is missing\nset it in [plugins.crash]",
    })
    .to_string();
    let o = cli.run(&sb.ws(), &["tool", "call", "crash", "--args", &args]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    has_all(
        &err,
        &[
            "the plugin crashed",
            "panicked at",
            "config key `root` is missing",
            "set it in [plugins.crash]",
        ],
    );
    lacks(&err, "working on step 0");

    // The model gets the same report.
    let o = cli.run(
        &sb.ws(),
        &["tool", "call", "crash", "--args", &args, "--json"],
    );
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("json");
    let message = v["error"]["message"].as_str().expect("message");
    assert!(message.contains("config key `root` is missing"), "{v}");
    assert!(message.len() < 4096, "{}", message.len());
}
