//! Hooks through the real binary: `[hooks]` bindings, the first-party hook
//! plugins, and the promises of the sandbox around them — a blocked call is
//! not run and the model reads why, a rewrite never makes a call more
//! allowed, a hook that spins is stopped and the call blocked, a hook with
//! no grants reaches nothing, and a project's hooks do nothing until the
//! project is trusted.

use crate::support::files::assert_absent;
use crate::support::manifest::openai_project;
use crate::support::mock::*;
use crate::support::model::calls_then_done;
use crate::support::output::printed;
use crate::support::text::{has, has_all, lacks};
use crate::*;
use corral_protocol::{Event, HookDecision, HookEvent};
use serde_json::json;

const KEY: (&str, &str) = ("TEST_OPENAI_KEY", "sk-hooks-test");

fn run_command(id: &'static str, command: &str) -> Call {
    (id, "run_command", json!({ "command": command }))
}

/// Runs one prompt with the openai provider on the mock, in full-auto mode
/// unless `args` says otherwise; returns the exit code, and what it printed
/// (stdout, then stderr).
fn run(cli: &Cli, sb: &Sandbox, args: &[&str]) -> (Option<i32>, String) {
    let mut all = vec!["run", "--provider", "openai", "--mode", "full-auto"];
    all.extend_from_slice(args);
    all.push("go");
    let o = cli.run_env(&sb.ws(), &all, &[KEY]);
    (o.status.code(), printed(&o))
}

/// The hook events of the session's log: (event, plugin, decision, detail).
fn hook_events(cli: &Cli) -> Vec<(HookEvent, String, HookDecision, String)> {
    let records = corral_core::session::read(&crate::support::log::session_log(cli)).expect("log");
    records
        .into_iter()
        .filter_map(|r| match r.event {
            Event::Hook {
                event,
                plugin,
                decision,
                detail,
                ..
            } => Some((event, plugin, decision, detail)),
            _ => None,
        })
        .collect()
}

fn test_hook(name: &str, rest: &str) -> String {
    plugin_toml(name, corral_test_programs::HOOK, rest)
}

#[test]
fn a_before_tool_hook_blocks_a_command_and_the_model_reads_why() {
    let mock = calls_then_done(vec![
        run_command("c1", "touch pwned"),
        run_command("c2", "git push --force origin main"),
        run_command("c3", "touch fine"),
    ]);
    let sb = Sandbox::new();
    let hooks = r#"
[plugins.no-push]
source = "builtin:hook-block"
config = { patterns = '["touch pwned", "git push --force"]' }

[hooks]
before_tool = [{ plugin = "no-push", tools = ["run_*"] }]
"#;
    sb.write("corral.toml", &openai_project(mock.port, hooks));
    let cli = Cli::new();
    let (code, err) = run(&cli, &sb, &[]);
    assert_eq!(code, Some(0), "{err}");
    assert!(!sb.ws().join("pwned").exists(), "a blocked command ran");
    assert!(
        sb.ws().join("fine").exists(),
        "an allowed command did not run"
    );
    let requests = mock.requests();
    let result = openai_tool_result(&requests[1], "c1");
    assert!(
        result.starts_with("blocked by hook `no-push`: the command matches `touch pwned`"),
        "{result}"
    );
    let result = openai_tool_result(&requests[1], "c2");
    has(&result, "matches `git push --force`");
    let decisions: Vec<HookDecision> = hook_events(&cli).into_iter().map(|e| e.2).collect();
    assert_eq!(
        decisions,
        [
            HookDecision::Block,
            HookDecision::Block,
            HookDecision::Continue
        ]
    );
}

#[test]
fn a_rewrite_cannot_turn_a_denied_call_into_an_allowed_one() {
    let mock = calls_then_done(vec![
        run_command("c1", "touch denied"),
        run_command("c2", "touch ok"),
        write_call("c3", "w.txt", "x"),
    ]);
    let sb = Sandbox::new();
    // The hook turns every call into `touch rewritten`: allowed by the
    // policy, but c1's original arguments are denied.
    let hooks = format!(
        "{}\n[hooks]\nbefore_tool = [{{ plugin = \"rewriter\" }}]\n\n[policy]\ndeny = [\"run_command(touch denied)\"]\n",
        test_hook(
            "rewriter",
            r#"config = { mode = "rewrite", arguments = '{"command": "touch rewritten"}' }"#
        )
    );
    sb.write("corral.toml", &openai_project(mock.port, &hooks));
    let cli = Cli::new();
    let (code, err) = run(&cli, &sb, &[]);
    assert_eq!(code, Some(0), "{err}");
    let requests = mock.requests();
    let denied = openai_tool_result(&requests[1], "c1");
    assert!(
        denied.starts_with("denied by the permission policy"),
        "{denied}"
    );
    has(&denied, "original arguments");
    assert!(!sb.ws().join("denied").exists());
    // The same rewrite of an allowed call is carried out: the hook works.
    assert!(!sb.ws().join("ok").exists());
    assert!(sb.ws().join("rewritten").exists());
    // New arguments that do not fit the tool's schema block the call.
    let invalid = openai_tool_result(&requests[1], "c3");
    assert!(
        invalid.starts_with("blocked: a before_tool hook rewrote the arguments"),
        "{invalid}"
    );
    assert!(!sb.ws().join("w.txt").exists());
}

#[test]
fn a_hook_that_loops_is_stopped_at_its_limit_and_the_call_is_blocked() {
    let mock = calls_then_done(vec![run_command("c1", "touch looped")]);
    let sb = Sandbox::new();
    let hooks = format!(
        "{}\n[hooks]\nbefore_tool = [{{ plugin = \"spin\" }}]\n",
        test_hook(
            "spin",
            r#"config = { mode = "loop" }
limits = { timeout_ms = 300 }"#
        )
    );
    sb.write("corral.toml", &openai_project(mock.port, &hooks));
    let cli = Cli::new();
    let (code, err) = run(&cli, &sb, &[]);
    assert_eq!(code, Some(0), "{err}");
    assert!(!sb.ws().join("looped").exists(), "the call ran");
    let result = openai_tool_result(&mock.requests()[1], "c1");
    has(
        &result,
        "the before_tool hook `spin` failed, and a failed hook blocks",
    );
    has(&result, "timed out after 300 ms");
    let events = hook_events(&cli);
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].2, HookDecision::Failed);
}

#[test]
fn a_hook_with_no_grants_reaches_no_file_and_no_network() {
    let target = MockServer::start(|_, _| Reply::Status(200, Vec::new(), "{}".into()));
    let url = format!("http://127.0.0.1:{}/steal", target.port);
    for granted in [true, false] {
        let mock = calls_then_done(vec![run_command("c1", "touch x")]);
        let sb = Sandbox::new();
        let (path, grants) = if granted {
            (
                "hello.txt".to_owned(),
                format!(
                    "grants.fs = [{{ path = \".\", access = \"ro\" }}]\ngrants.net = [\"http://127.0.0.1:{}\"]",
                    target.port
                ),
            )
        } else {
            let secret = sb.outside().join("secret.txt");
            (secret.display().to_string(), String::new())
        };
        let hooks = format!(
            "{}\n[hooks]\nbefore_tool = [{{ plugin = \"nosy\" }}]\n",
            test_hook(
                "nosy",
                &format!(
                    "config = {{ mode = \"reach\", path = {path:?}, url = {url:?} }}\n{grants}"
                )
            )
        );
        sb.write("corral.toml", &openai_project(mock.port, &hooks));
        let cli = Cli::new();
        let (code, err) = run(&cli, &sb, &[]);
        assert_eq!(code, Some(0), "{err}");
        let result = openai_tool_result(&mock.requests()[1], "c1");
        if granted {
            // What a grant gives, a hook gets: the test can see a reach.
            has_all(
                &result,
                &[
                    "file: READ hello from the workspace",
                    "dir: LISTED",
                    "net: FETCHED status 200",
                ],
            );
            assert_eq!(target.requests().len(), 1);
        } else {
            has_all(&result, &["file: denied", "dir: denied", "net: denied"]);
            lacks(&result, SECRET);
            assert_eq!(target.requests().len(), 1, "the hook reached the network");
        }
    }
}

#[test]
fn a_project_hook_is_ignored_until_trusted() {
    let mock = MockServer::start(|n, _| match n % 2 {
        0 => Reply::Sse(openai_sse("", &[run_command("c1", "touch pwned")])),
        _ => Reply::Sse(openai_sse("Done.", &[])),
    });
    let sb = Sandbox::new();
    let cli = Cli::untrusting();
    // The provider comes from the user's own manifest; the hook from the
    // project's.
    let user = cli.home.path().join("config/corral/corral.toml");
    std::fs::create_dir_all(user.parent().expect("dir")).expect("mkdir");
    std::fs::write(&user, openai_project(mock.port, "")).expect("user manifest");
    sb.write(
        "corral.toml",
        r#"
[plugins.no-touch]
source = "builtin:hook-block"
config = { patterns = ["touch pwned"] }

[hooks]
before_tool = [{ plugin = "no-touch" }]
"#,
    );
    let (code, err) = run(&cli, &sb, &[]);
    assert_eq!(code, Some(0), "{err}");
    has(&err, "not trusted");
    assert!(
        sb.ws().join("pwned").exists(),
        "an untrusted project's hook ran"
    );
    assert!(hook_events(&cli).is_empty());

    std::fs::remove_file(sb.ws().join("pwned")).expect("rm");
    let o = cli.run(&sb.ws(), &["trust", "--yes"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (code, err) = run(&cli, &sb, &[]);
    assert_eq!(code, Some(0), "{err}");
    assert_absent(&sb, "pwned", "the trusted hook did not block");
    let result = openai_tool_result(&mock.requests()[3], "c1");
    assert!(result.starts_with("blocked by hook `no-touch`"), "{result}");
}

#[test]
fn session_start_context_from_a_granted_command_reaches_the_model() {
    let mock = calls_then_done(Vec::new());
    let sb = Sandbox::new();
    let git = |args: &[&str]| {
        let o = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(args)
            .current_dir(sb.ws())
            .output()
            .expect("git");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    git(&["init", "-q"]);
    git(&["add", "hello.txt"]);
    git(&[
        "commit",
        "-q",
        "-m",
        "the commit the model should know about",
    ]);
    let hooks = r#"
[plugins.git-context]
source = "builtin:hook-context"
grants.exec = [{ program = "git", args = ["log", "**"] }]

[hooks]
session_start = [{ plugin = "git-context" }]
"#;
    sb.write("corral.toml", &openai_project(mock.port, hooks));
    let cli = Cli::new();
    let (code, err) = run(&cli, &sb, &[]);
    assert_eq!(code, Some(0), "{err}");
    let system = mock.requests()[0].body["messages"][0]["content"]
        .as_str()
        .expect("system prompt")
        .to_owned();
    has(
        &system,
        "[context from hook `git-context`]\nOutput of `git log -5 --oneline`",
    );
    has(&system, "the commit the model should know about");
}

#[test]
fn the_formatter_runs_after_an_edit_through_a_granted_program() {
    let rustfmt = std::process::Command::new("rustup")
        .args(["which", "rustfmt"])
        .output()
        .expect("rustup which rustfmt");
    let rustfmt = String::from_utf8(rustfmt.stdout).expect("utf-8");
    let rustfmt = rustfmt.trim();
    assert!(!rustfmt.is_empty(), "rustfmt is needed for this test");
    let mock = calls_then_done(vec![write_call("w1", "src/lib.rs", "pub fn  f( )->u8{1}")]);
    let sb = Sandbox::new();
    let hooks = format!(
        r#"
[plugins.format]
source = "builtin:hook-format"
grants.exec = [{{ program = {rustfmt:?}, args = ["--edition", "2024", "*"] }}]
config = {{ rs = '[{rustfmt:?}, "--edition", "2024"]' }}

[hooks]
after_tool = [{{ plugin = "format", tools = ["write_file", "edit_file"] }}]
"#
    );
    sb.write("corral.toml", &openai_project(mock.port, &hooks));
    let cli = Cli::new();
    let (code, err) = run(&cli, &sb, &[]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        std::fs::read_to_string(sb.ws().join("src/lib.rs")).expect("written"),
        "pub fn f() -> u8 {\n    1\n}\n"
    );
    let result = openai_tool_result(&mock.requests()[1], "w1");
    has(
        &result,
        "[context from hook `format`]\nformatted `src/lib.rs`",
    );
}

/// Keeps the events a hook run emits.
#[derive(Default)]
struct Kept(Vec<Event>);

impl corral_core::hooks::Emit for Kept {
    fn emit(&mut self, event: Event) -> anyhow::Result<()> {
        self.0.push(event);
        Ok(())
    }
}

/// `before_compact` and `subagent_stop` are run by the compaction and the
/// sub-agent code through `Hooks::pre_compact` and `Hooks::subagent_stop`:
/// each runs only the hooks of its event, folds their decisions, and
/// reports a failing hook without blocking (neither event is blocking).
#[tokio::test]
async fn compaction_and_subagent_hooks_decide_through_their_entry_points() {
    let sb = Sandbox::new();
    let toml = format!(
        "{}{}{}\n[hooks]\nbefore_compact = [{{ plugin = \"guide\" }}, {{ plugin = \"keep\" }}]\n\
         subagent_stop = [{{ plugin = \"spin\" }}, {{ plugin = \"keep\" }}]\n",
        test_hook(
            "guide",
            r#"config = { mode = "context", context = "keep the file names" }"#
        ),
        test_hook("keep", r#"config = { mode = "block", reason = "not yet" }"#),
        test_hook(
            "spin",
            "config = { mode = \"loop\" }\nlimits = { timeout_ms = 200 }"
        ),
    );
    let manifest = sb.manifest(&toml).expect("manifest");
    let plugins = runtime().load(&manifest).await.expect("load");
    let hooks = corral_core::hooks::Hooks::new(&manifest.hooks, &plugins)
        .await
        .expect("hooks");

    let mut sink = Kept::default();
    let out = hooks.pre_compact(false, 40, &mut sink).await.expect("run");
    assert_eq!(
        out.context,
        ["[context from hook `guide`]\nkeep the file names"]
    );
    assert_eq!(
        out.blocked.as_deref(),
        Some("blocked by hook `keep`: not yet")
    );
    let decisions: Vec<_> = sink
        .0
        .iter()
        .map(|e| match e {
            Event::Hook {
                event,
                plugin,
                decision,
                ..
            } => (*event, plugin.as_str(), *decision),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        decisions,
        [
            (HookEvent::BeforeCompact, "guide", HookDecision::AddContext),
            (HookEvent::BeforeCompact, "keep", HookDecision::Block),
        ]
    );

    let mut sink = Kept::default();
    let out = hooks
        .subagent_stop("count the files", "12", &mut sink)
        .await
        .expect("run");
    // The spinning hook is reported and skipped; the next one still runs.
    assert_eq!(
        out.blocked.as_deref(),
        Some("blocked by hook `keep`: not yet")
    );
    let Event::Hook {
        decision, detail, ..
    } = &sink.0[0]
    else {
        panic!("{:?}", sink.0)
    };
    assert_eq!(*decision, HookDecision::Failed);
    has(detail, "timed out after 200 ms");
    assert_eq!(sink.0.len(), 2);
}

/// A hook written in Python (`tests/programs/hook-python/app.py`), built
/// with componentize-py against the WIT `corral plugin wit` serves, blocks
/// a call like a Rust one: hooks are plugins, in any language.
#[test]
fn a_python_hook_built_from_the_served_wit_blocks_a_call() {
    let Some(componentize_py) = std::env::var_os("CORRAL_COMPONENTIZE_PY") else {
        crate::support::skip::missing(
            "CORRAL_COMPONENTIZE_PY is unset (the plugin templates' toolchain)",
            crate::support::skip::CI_RUN,
        );
        return;
    };
    let (sb, cli) = workspace_and_cli();
    let project = sb.root.path().join("pyhook");
    std::fs::create_dir(&project).expect("mkdir");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/programs/hook-python/app.py"),
        project.join("app.py"),
    )
    .expect("copy app.py");
    let o = cli.run(&project, &["plugin", "wit", "--out", "wit"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = std::process::Command::new(componentize_py)
        .args([
            "-d",
            "wit",
            "-w",
            "hook-plugin",
            "componentize",
            "app",
            "-o",
        ])
        .arg(project.join("no-secrets.wasm"))
        .current_dir(&project)
        .output()
        .expect("componentize-py");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    let mock = calls_then_done(vec![
        run_command("c1", "touch .env"),
        run_command("c2", "touch fine"),
    ]);
    let wasm = project.join("no-secrets.wasm").display().to_string();
    let hooks = format!(
        "{}\n[hooks]\nbefore_tool = [{{ plugin = \"no-secrets\" }}]\n",
        plugin_toml("no-secrets", &wasm, "")
    );
    sb.write("corral.toml", &openai_project(mock.port, &hooks));
    let (code, err) = run(&cli, &sb, &[]);
    assert_eq!(code, Some(0), "{err}");
    assert!(!sb.ws().join(".env").exists(), "the blocked call ran");
    assert!(sb.ws().join("fine").exists());
    let result = openai_tool_result(&mock.requests()[1], "c1");
    assert!(
        result.starts_with("blocked by hook `no-secrets`: the arguments mention `.env`"),
        "{result}"
    );
}

#[test]
fn a_hook_can_ask_before_a_call_and_withhold_an_output() {
    let mock = calls_then_done(vec![
        run_command("c1", "touch asked"),
        ("c2", "read_file", json!({ "path": "hello.txt" })),
    ]);
    let sb = Sandbox::new();
    let hooks = format!(
        "{}{}\n[hooks]\nbefore_tool = [{{ plugin = \"careful\", tools = [\"run_command\"] }}]\n\
         after_tool = [{{ plugin = \"redact\", tools = [\"read_file\"] }}]\n",
        test_hook(
            "careful",
            r#"config = { mode = "ask", reason = "commands need a human here" }"#
        ),
        test_hook(
            "redact",
            r#"config = { mode = "block", reason = "file contents stay private" }"#
        ),
    );
    sb.write("corral.toml", &openai_project(mock.port, &hooks));
    let cli = Cli::new();
    // full-auto would run the command unasked; the hook makes it ask, and
    // a non-interactive run refuses.
    let (code, err) = run(&cli, &sb, &[]);
    assert_eq!(code, Some(0), "{err}");
    assert!(!sb.ws().join("asked").exists(), "the call ran unasked");
    let requests = mock.requests();
    let asked = openai_tool_result(&requests[1], "c1");
    has(
        &asked,
        "needs the user's approval and the run is not interactive",
    );
    let withheld = openai_tool_result(&requests[1], "c2");
    assert!(
        withheld.starts_with("blocked by hook `redact`: file contents stay private"),
        "{withheld}"
    );
    lacks(&withheld, "hello from the workspace");
    has(&err, "hook `careful` (before_tool) asked");
}

/// A model that answers at once, and a project whose test hook `name`,
/// run at `event`, blocks with `reason`.
fn blocking(event: &str, name: &str, reason: &str) -> (MockServer, Sandbox) {
    let mock = calls_then_done(Vec::new());
    let sb = Sandbox::new();
    let hooks = format!(
        "{}\n[hooks]\n{event} = [{{ plugin = \"{name}\" }}]\n",
        test_hook(
            name,
            &format!(r#"config = {{ mode = "block", reason = "{reason}" }}"#)
        )
    );
    sb.write("corral.toml", &openai_project(mock.port, &hooks));
    (mock, sb)
}

#[test]
fn prompt_and_stop_hooks_block_a_prompt_and_keep_a_run_going() {
    // A blocked prompt never reaches the model.
    let (mock, sb) = blocking("user_prompt", "gate", "no prompts today");
    let cli = Cli::new();
    let (code, err) = run(&cli, &sb, &[]);
    assert_eq!(code, Some(5), "{err}");
    has(
        &err,
        "the prompt was not sent: blocked by hook `gate`: no prompts today",
    );
    assert!(mock.requests().is_empty());

    // A stop hook that blocks sends the model on with its reason.
    let (mock, sb) = blocking("stop", "more", "run the tests first");
    let (code, err) = run(&cli, &sb, &["--max-iterations", "2"]);
    assert_eq!(code, Some(4), "{err}");
    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    let messages = requests[1].body["messages"].as_array().expect("messages");
    let last = messages.last().expect("a message");
    assert_eq!(last["role"], "user");
    assert_eq!(
        last["content"],
        "[hook `more` did not let the run stop]\nrun the tests first"
    );
}

#[test]
fn bad_hook_bindings_are_refused_with_the_line_and_the_fix() {
    let sb = Sandbox::new();
    let hook = test_hook("h", "");
    let err = sb
        .manifest(&format!(
            "{hook}\n[hooks]\nbefore_tools = [{{ plugin = \"h\" }}]\n"
        ))
        .unwrap_err();
    has_all(&err, &["unknown field `before_tools`", "before_tool"]);
    let err = sb
        .manifest(&format!(
            "{hook}\n[hooks]\nbefore_tool = [{{ plugin = \"ghost\" }}]\n"
        ))
        .unwrap_err();
    assert!(
        err.starts_with("corral.toml:6:1: hooks.before_tool: plugin `ghost` is not declared"),
        "{err}"
    );
    has(&err, "declare [plugins.ghost]");
    let err = sb
        .manifest(&format!(
            "{hook}\n[hooks]\nsession_start = [{{ plugin = \"h\", tools = [\"x\"] }}]\n"
        ))
        .unwrap_err();
    has(&err, "`tools` applies only to tool events");
    let manifest = sb
        .manifest(&format!(
            "{hook}\n[hooks]\nafter_tool = [{{ plugin = \"h\", tools = [\"write_*\"] }}]\n"
        ))
        .expect("manifest");
    assert_eq!(manifest.hooks.len(), 1);
    assert_eq!(manifest.hooks[0].event, HookEvent::AfterTool);
    assert_eq!(manifest.hooks[0].tools, ["write_*"]);
}

#[test]
fn a_binding_to_a_plugin_that_is_not_a_hook_is_refused_when_the_session_opens() {
    let mock = calls_then_done(Vec::new());
    let sb = Sandbox::with_manifest(&openai_project(
        mock.port,
        "[hooks]\nbefore_tool = [{ plugin = \"fs\" }]\n",
    ));
    let cli = Cli::new();
    let (code, err) = run(&cli, &sb, &[]);
    assert_ne!(code, Some(0), "{err}");
    has(&err, "plugin `fs` (builtin:fs) is not a hook plugin");
    assert!(mock.requests().is_empty());
}

/// A hook plugin makes the instance of its next event while the host is
/// idle, as tool plugins do, and each instance still handles one event:
/// nothing an earlier event left in its memory is there.
#[tokio::test]
async fn a_hook_instance_made_ahead_handles_exactly_one_event() {
    let sb = Sandbox::new();
    let toml = format!(
        "{}\n[hooks]\nbefore_compact = [{{ plugin = \"count\" }}]\n",
        test_hook("count", r#"config = { mode = "count" }"#),
    );
    let manifest = sb.manifest(&toml).expect("manifest");
    let plugins = runtime().load(&manifest).await.expect("load");
    let hooks = corral_core::hooks::Hooks::new(&manifest.hooks, &plugins)
        .await
        .expect("hooks");
    let hook = plugins
        .plugins()
        .iter()
        .find(|p| p.decl().name == "count")
        .expect("the hook plugin is loaded")
        .clone();
    let mut sink = Kept::default();
    // The first event loads the plugin's code and makes its instance on
    // the event's path; each later one finds an instance made ahead.
    for event in 0..4 {
        if event > 0 {
            let waited = std::time::Instant::now();
            while !hook.ready_ahead() {
                assert!(
                    waited.elapsed() < std::time::Duration::from_secs(20),
                    "no instance was made ahead"
                );
                plugins.make_ahead();
                tokio::time::sleep(std::time::Duration::from_millis(2)).await;
            }
        }
        let out = hooks.pre_compact(false, 40, &mut sink).await.expect("run");
        assert_eq!(
            out.context,
            ["[context from hook `count`]\nhandled 1"],
            "event {event}"
        );
        assert!(
            !hook.ready_ahead(),
            "event {event} did not take the instance made ahead"
        );
    }
}
