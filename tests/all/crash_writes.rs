//! File changes that survive a crash, through the `corral` binary: SIGKILL
//! while `write_file` rewrites a large file or while a multi-file
//! `apply_patch` runs leaves every file with exactly its old or exactly its
//! new content (all old or all new for one patch), never a prefix or a mix;
//! the next start finishes or takes back what the kill cut short and
//! `resume` tells the model which; a subagent's log left open by the kill
//! is closed when its parent resumes; a killed `plugin add` leaves no
//! temporary file once corral installs again.

use crate::support::agents::{family, project};
use crate::support::cassette::{answer_turn, calls_turn, slow_answer_turn};
use crate::support::log::of_type;
use crate::support::manifest::{KEYS, both_providers};
use crate::support::mock::*;
use crate::support::model::calls_then;
use crate::support::output::{assert_exit, stdout};
use crate::support::process::{self, wait_bounded, wait_for};
use crate::*;
use serde_json::{Value, json};
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

/// Longest one command may take before the test gives up on it.
const HANG: Duration = Duration::from_secs(120);

/// Extra waits after the write is seen to start, before the kill.
const KILL_DELAYS_MS: [u64; 4] = [0, 3, 15, 60];

/// `n` MiB of lines of `ch`, each line numbered so that a shifted or
/// spliced copy differs.
fn big(ch: char, mib: usize, first: &str) -> String {
    let mut s = String::with_capacity(mib << 20);
    s.push_str(first);
    let fill: String = std::iter::repeat_n(ch, 55).collect();
    let mut i = 0u64;
    while s.len() < mib << 20 {
        s.push_str(&format!("{i:08}{fill}\n"));
        i += 1;
    }
    s
}

/// Names in `dir` that are write temporaries (the host's or the base's).
fn temps(dir: &Path) -> Vec<String> {
    names_in(dir, |n| n.contains(".corral-tmp-"))
}

/// The names in `dir` that `keep` accepts (none if it cannot be read).
fn names_in(dir: &Path, keep: impl Fn(&str) -> bool) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|r| {
            r.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| keep(n))
                .collect()
        })
        .unwrap_or_default()
}

/// The journal entries corral's data directory holds for any workspace.
fn journals(cli: &Cli) -> Vec<String> {
    let root = cli.home.path().join("data/corral/journal");
    let mut out = Vec::new();
    for dir in std::fs::read_dir(root).into_iter().flatten().flatten() {
        for e in std::fs::read_dir(dir.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            out.push(e.file_name().to_string_lossy().into_owned());
        }
    }
    out
}

/// Identity and size of a file, to see that something started changing it.
fn stamp(path: &Path) -> Option<(u64, u64)> {
    std::fs::metadata(path).ok().map(|m| (m.ino(), m.len()))
}

/// Waits until one of `files` changes or a temporary file appears in
/// `dir`, then `delay`, then SIGKILLs `child`. Returns whether the kill
/// landed while corral ran.
fn kill_while_writing(child: &mut Child, dir: &Path, files: &[&Path], delay: Duration) -> bool {
    let before: Vec<_> = files.iter().map(|f| stamp(f)).collect();
    let deadline = Instant::now() + HANG;
    loop {
        if child.try_wait().expect("wait").is_some() {
            return false;
        }
        let changed = files.iter().zip(&before).any(|(f, b)| stamp(f) != *b);
        if changed || !temps(dir).is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "corral never started writing");
        std::thread::sleep(Duration::from_micros(300));
    }
    std::thread::sleep(delay);
    let ran = child.try_wait().expect("wait").is_none();
    let _ = child.kill();
    let _ = child.wait();
    ran
}

fn fs_limits() -> &'static str {
    "[plugins.fs]\nsource = \"builtin:fs\"\ngrants.fs = [{ path = \".\", access = \"rw\" }]\n\
     limits = { timeout_ms = 120000, memory_mb = 1024 }\n"
}

#[test]
fn sigkill_during_a_large_write_file_leaves_the_old_or_the_new_content() {
    let old = big('o', 48, "old\n");
    let new = big('n', 64, "new\n");
    let mut killed_mid = 0;
    let mut left_journal = 0;
    for delay in KILL_DELAYS_MS {
        let sb = Sandbox::with_manifest(fs_limits());
        sb.write("big.txt", &old);
        let target = sb.ws().join("big.txt");
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o750)).expect("chmod");
        let args = sb.outside().join("args.json");
        std::fs::write(
            &args,
            json!({"path": "big.txt", "content": new}).to_string(),
        )
        .expect("args");
        let cli = Cli::new();
        let mut child = process::quiet(&mut cli.command(
            &sb.ws(),
            &[
                "tool",
                "call",
                "write_file",
                "--args",
                &format!("@{}", args.display()),
            ],
        ));
        if kill_while_writing(
            &mut child,
            &sb.ws(),
            &[&target],
            Duration::from_millis(delay),
        ) {
            killed_mid += 1;
        }
        if !journals(&cli).is_empty() {
            left_journal += 1;
        }
        let after = std::fs::read_to_string(&target).expect("big.txt is still there");
        assert!(
            after == old || after == new,
            "delay {delay} ms: big.txt is neither old nor new after SIGKILL ({} bytes, old {}, \
             new {})",
            after.len(),
            old.len(),
            new.len()
        );
        // The next start in the workspace clears what the kill left.
        let o = cli.run(&sb.ws(), &["tool", "call", "list_files", "--args", "{}"]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let settled = std::fs::read_to_string(&target).expect("big.txt");
        assert!(settled == old || settled == new, "delay {delay} ms");
        assert_eq!(temps(&sb.ws()), Vec::<String>::new(), "delay {delay} ms");
        assert!(journals(&cli).is_empty(), "{:?}", journals(&cli));
        let mode = std::fs::metadata(&target)
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o7777, 0o750, "the file's mode is kept");
    }
    assert!(killed_mid > 0, "no kill landed while corral was writing");
    assert!(
        left_journal > 0,
        "no kill left a write for the next start to settle"
    );
}

#[test]
fn write_file_through_a_symlink_replaces_its_target_and_keeps_the_link() {
    let sb = Sandbox::new();
    sb.write("real/run.sh", "#!/bin/sh\necho old\n");
    let real = sb.ws().join("real/run.sh");
    std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::os::unix::fs::symlink("real/run.sh", sb.ws().join("run.sh")).expect("link");
    std::os::unix::fs::symlink(sb.outside().join("secret.txt"), sb.ws().join("out.txt"))
        .expect("link out");
    let cli = Cli::new();
    let call = |args: Value| {
        cli.run(
            &sb.ws(),
            &["tool", "call", "write_file", "--args", &args.to_string()],
        )
    };
    let o = call(json!({"path": "run.sh", "content": "#!/bin/sh\necho new\n"}));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        std::fs::symlink_metadata(sb.ws().join("run.sh"))
            .expect("link")
            .file_type()
            .is_symlink(),
        "the link itself was replaced"
    );
    assert_eq!(
        std::fs::read_to_string(&real).expect("real"),
        "#!/bin/sh\necho new\n"
    );
    assert_eq!(
        std::fs::metadata(&real).expect("meta").permissions().mode() & 0o777,
        0o755
    );
    // A link that leads out of the workspace is refused, nothing written.
    let o = call(json!({"path": "out.txt", "content": "pwned"}));
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert_eq!(
        std::fs::read_to_string(sb.outside().join("secret.txt")).expect("secret"),
        SECRET
    );
    assert_eq!(temps(&sb.ws()), Vec::<String>::new());
    assert_eq!(temps(&sb.ws().join("real")), Vec::<String>::new());
}

/// A patch changing the first line of each of `files`.
fn patch_of(files: &[&str]) -> String {
    let mut p = String::from("*** Begin Patch\n");
    for f in files {
        p.push_str(&format!(
            "*** Update File: {f}\n@@\n-version 1 of {f}\n+version 2 of {f}\n"
        ));
    }
    p.push_str("*** End Patch\n");
    p
}

#[test]
fn sigkill_during_a_multi_file_apply_patch_then_resume_leaves_all_or_none() {
    const FILES: [&str; 3] = ["a.txt", "b.txt", "c.txt"];
    let mut killed_mid = 0;
    let mut recovered = 0;
    for delay in KILL_DELAYS_MS {
        let patch = patch_of(&FILES);
        let openai = calls_then(
            "Patching. ",
            vec![("patch_1", "apply_patch", json!({ "patch": patch }))],
            "Resumed.",
        );
        let sb = Sandbox::new();
        let olds: Vec<String> = FILES
            .iter()
            .map(|f| big('x', 12, &format!("version 1 of {f}\n")))
            .collect();
        let news: Vec<String> = FILES
            .iter()
            .zip(&olds)
            .map(|(_, o)| o.replacen("version 1", "version 2", 1))
            .collect();
        for (f, o) in FILES.iter().zip(&olds) {
            sb.write(f, o);
        }
        sb.write("corral.toml", &both_providers(openai.port, 9, fs_limits()));
        let cli = Cli::new();
        let mut cmd = cli.command(
            &sb.ws(),
            &["run", "--provider", "openai", "Bump the versions"],
        );
        for (k, v) in KEYS {
            cmd.env(k, v);
        }
        let mut child = process::quiet(&mut cmd);
        let paths: Vec<_> = FILES.iter().map(|f| sb.ws().join(f)).collect();
        let refs: Vec<&Path> = paths.iter().map(|p| p.as_path()).collect();
        if kill_while_writing(&mut child, &sb.ws(), &refs, Duration::from_millis(delay)) {
            killed_mid += 1;
        }
        let state = |when: &str| {
            let now: Vec<String> = paths
                .iter()
                .map(|p| std::fs::read_to_string(p).expect("file"))
                .collect();
            let all_old = now == olds;
            let all_new = now == news;
            assert!(
                all_old || all_new,
                "delay {delay} ms, {when}: the patch is half applied: {:?}",
                now.iter()
                    .map(|t| t.lines().next().unwrap_or("").to_owned())
                    .collect::<Vec<_>>()
            );
            all_new
        };
        state("after SIGKILL");
        let left = journals(&cli);

        let o = cli.run_env(&sb.ws(), &["resume", "--last"], &KEYS);
        assert_exit(&o, 0);
        let made = state("after resume");
        assert_eq!(temps(&sb.ws()), Vec::<String>::new(), "delay {delay} ms");
        assert!(journals(&cli).is_empty(), "{:?}", journals(&cli));
        // The model is told what became of its interrupted patch.
        if left.iter().any(|n| n.ends_with(".json")) {
            recovered += 1;
            let reqs = openai.requests();
            let last = reqs.last().expect("the resumed request");
            let told = openai_tool_result(last, "patch_1");
            let expected = if made { "completed" } else { "rolled back" };
            assert!(told.contains(expected), "delay {delay} ms: {told}");
        }
    }
    assert!(killed_mid > 0, "no kill landed while corral was writing");
    assert!(recovered > 0, "no kill left a patch for resume to settle");
}

#[test]
fn a_subagent_log_left_open_by_sigkill_is_closed_when_its_parent_resumes() {
    let sb = Sandbox::new();
    project(
        &sb,
        "ask",
        100,
        json!([
            calls_turn(&[("call_a", "task", json!({"prompt": "Count to a thousand."}))]),
            answer_turn("parent done"),
        ]),
        json!([
            {"prompt": "Count to a thousand.", "turns": [slow_answer_turn("never", 600)]},
        ]),
    );
    let cli = Cli::new();
    let (mut child, rx) = process::streaming(&mut cli.command(&sb.ws(), &["run", "--json", "go"]));
    wait_for(&rx, process::HANG, "the child streaming", |e| {
        e["type"] == "subagent" && e["event"]["type"] == "request_begin"
    });
    child.kill().expect("SIGKILL");
    let _ = child.wait();
    let (parent, children) = family(&cli);
    assert_eq!(children.len(), 1);
    assert!(
        of_type(&children[0].1, "stop").is_empty(),
        "the kill left it open"
    );
    let parent_id = parent[0]["session_id"].as_str().expect("id").to_owned();

    let mut resumed = process::quiet(&mut cli.command(&sb.ws(), &["resume", &parent_id]));
    wait_bounded(&mut resumed, process::HANG);
    let (_, children) = family(&cli);
    let log = &children[0].1;
    let last = log.last().expect("event");
    assert_eq!(last["type"], "stop", "{last}");
    assert_eq!(last["reason"], "interrupted", "{last}");
    assert!(
        last["message"]
            .as_str()
            .is_some_and(|m| m.contains(&parent_id)),
        "{last}"
    );
}

/// A copy of `wasm` made `mib` MiB larger by a custom section, so that
/// writing it takes long enough to be killed midway.
fn padded_component(wasm: &str, mib: usize, out: &Path) {
    let mut bytes = std::fs::read(wasm).expect("component");
    let name = b"corral-test-padding";
    let payload = mib << 20;
    let mut section = Vec::new();
    let mut size = name.len() + 1 + payload;
    // Unsigned LEB128 of the section's size.
    loop {
        let byte = (size & 0x7f) as u8;
        size >>= 7;
        if size == 0 {
            section.push(byte);
            break;
        }
        section.push(byte | 0x80);
    }
    bytes.push(0);
    bytes.extend_from_slice(&section);
    bytes.push(name.len() as u8);
    bytes.extend_from_slice(name);
    bytes.resize(bytes.len() + payload, 0x5a);
    std::fs::write(out, bytes).expect("padded");
}

#[test]
fn a_killed_plugin_add_leaves_no_temporary_file_after_the_next_install() {
    let sb = Sandbox::new();
    let wasm = sb.outside().join("big.wasm");
    padded_component(corral_test_programs::EXAMPLE, 64, &wasm);
    let wasm = wasm.to_str().expect("utf-8").to_owned();
    let cli = Cli::new();
    let store = cli.home.path().join("data/corral/plugins");
    let hidden = |dir: &Path| names_in(dir, |n| n.starts_with('.'));
    let mut left = false;
    for attempt in 0..6 {
        let mut child =
            process::quiet(&mut cli.command(&sb.ws(), &["plugin", "add", &wasm, "--yes"]));
        let deadline = Instant::now() + HANG;
        loop {
            if child.try_wait().expect("wait").is_some() {
                break;
            }
            if !hidden(&store).is_empty() {
                let _ = child.kill();
                break;
            }
            assert!(
                Instant::now() < deadline,
                "attempt {attempt}: plugin add hung"
            );
            std::thread::sleep(Duration::from_micros(200));
        }
        let _ = child.wait();
        if !hidden(&store).is_empty() {
            left = true;
            break;
        }
        // It finished before the poll saw its temporary file: start over.
        let _ = cli.run(&sb.ws(), &["plugin", "remove", "example"]);
    }
    assert!(left, "no kill landed while plugin add wrote the store");
    let o = cli.run(
        &sb.ws(),
        &["plugin", "add", corral_test_programs::ECHO, "--yes"],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        hidden(&store),
        Vec::<String>::new(),
        "the killed add's temporary file stayed"
    );
}

/// corral's own ids (`c-N`) of the calls a raw log began, wrapped
/// subagent events included.
fn began_ids(path: &Path) -> Vec<String> {
    fn of(e: &Value, out: &mut Vec<String>) {
        if e["type"] == "tool_call_begin"
            && let Some(id) = e["call"]["id"].as_str()
        {
            out.push(id.to_owned());
        }
        if e["type"] == "subagent" {
            of(&e["event"], out);
        }
    }
    let mut out = Vec::new();
    for line in std::fs::read_to_string(path).expect("log").lines() {
        if let Ok(record) = serde_json::from_str::<Value>(line) {
            of(&record["event"], &mut out);
        }
    }
    out
}

// Failed before the fix: the resumed parent counted from its own log only,
// which the kill had cut before its subagent's calls reached it, and gave
// its next call `c-2`, an id the subagent's log already held.
#[test]
fn call_ids_stay_unique_across_a_session_and_its_subagents_after_a_kill() {
    let sb = Sandbox::new();
    project(
        &sb,
        "full-auto",
        100,
        json!([
            calls_turn(&[("call_a", "task", json!({"prompt": "Read the notes."}))]),
            calls_turn(&[("call_b", "read_file", json!({"path": "hello.txt"}))]),
            answer_turn("parent done"),
        ]),
        json!([
            {"prompt": "Read the notes.", "turns": [
                calls_turn(&[
                    ("sub_1", "read_file", json!({"path": "hello.txt"})),
                    ("sub_2", "read_file", json!({"path": "hello.txt"})),
                ]),
                slow_answer_turn("never", 600),
            ]},
        ]),
    );
    let cli = Cli::new();
    let (mut child, rx) = process::streaming(&mut cli.command(&sb.ws(), &["run", "--json", "go"]));
    let requests = std::cell::Cell::new(0);
    wait_for(&rx, process::HANG, "the subagent's second request", |e| {
        if e["type"] == "subagent" && e["event"]["type"] == "request_begin" {
            requests.set(requests.get() + 1);
        }
        requests.get() == 2
    });
    child.kill().expect("SIGKILL");
    let _ = child.wait();
    let logs = crate::support::log::session_logs(&cli);
    let (parents, children): (Vec<_>, Vec<_>) = logs.iter().partition(|p| {
        !std::fs::read_to_string(p)
            .expect("log")
            .contains("\"subagent_started\"")
    });
    let (parent, child_log) = (parents[0].clone(), children[0].clone());
    let child_ids = began_ids(&child_log);
    assert_eq!(child_ids.len(), 2, "{child_ids:?}");
    // The kill lands before the parent wrote its copies of the subagent's
    // events: its log ends at the first of them.
    let text = std::fs::read_to_string(&parent).expect("parent log");
    let kept: String = text
        .lines()
        .take_while(|l| !l.contains("\"type\":\"subagent\""))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&parent, kept).expect("cut the parent's log");
    let parent_id = parent
        .file_stem()
        .and_then(|s| s.to_str())
        .expect("id")
        .to_owned();
    let o = cli.run(&sb.ws(), &["resume", &parent_id]);
    assert_exit(&o, 0);
    let resumed = began_ids(&parent);
    let new: Vec<&String> = resumed.iter().filter(|id| *id != "c-1").collect();
    assert!(
        !new.is_empty(),
        "the resumed parent made no call: {resumed:?}"
    );
    for id in new {
        assert!(
            !child_ids.contains(id),
            "{id} was the subagent's already: {child_ids:?}"
        );
    }
}
