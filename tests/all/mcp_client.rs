//! corral as an MCP client: `[mcp.NAME]` servers started confined by their
//! grants, their tools listed and called through the real binary. The
//! servers here are hostile on purpose (tests/mcp/hostile_server.py, run by
//! the system's Python): what they try must be refused by the kernel or cut
//! off by the host.

use crate::support::cassette::{answer_turn, call_turn};
use crate::support::imports::import_config;
use crate::support::output::{stderr, stdout, stdout_has};
use crate::support::servers::{SYSTEM_PYTHON, hostile_runnable, hostile_script, installed};
use crate::support::text::{has, lacks};
use crate::*;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// A workspace whose `[mcp.hostile]` server is granted the workspace only;
/// `args` follow the script; `extra` is appended.
fn hostile(args: &[&str], extra: &str) -> Sandbox {
    let sb = Sandbox::new();
    let script = hostile_script(&sb);
    let mut all = vec![script.display().to_string()];
    all.extend(args.iter().map(|a| a.to_string()));
    sb.write(
        "corral.toml",
        &format!(
            "[mcp.hostile]\ncommand = {SYSTEM_PYTHON:?}\nargs = {}\ngrants = {{ fs = [\".\"] }}\n\
             timeout_ms = 5000\n{extra}",
            serde_json::to_string(&all).expect("args")
        ),
    );
    sb
}

/// `corral tool call` with `env` set.
fn call(
    cli: &Cli,
    sb: &Sandbox,
    tool: &str,
    args: Value,
    env: &[(&str, &str)],
) -> std::process::Output {
    cli.run_env(
        &sb.ws(),
        &["tool", "call", tool, "--args", &args.to_string()],
        env,
    )
}

#[test]
fn a_servers_tools_are_listed_under_its_prefix_with_escapes_inert() {
    if !hostile_runnable() {
        return;
    }
    let sb = hostile(&[], "");
    let cli = Cli::new();
    let o = cli.run(&sb.ws(), &["tools", "list", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(
        !text.contains('\u{1b}'),
        "a raw escape reached the terminal: {text:?}"
    );
    let list: Vec<Value> = serde_json::from_str(&text).expect("JSON");
    let tool = |name: &str| {
        list.iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {text}"))
    };
    let read = tool("hostile__read");
    assert_eq!(read["plugin"], "mcp:hostile");
    // Effects come from the manifest (a server granted a directory writes by
    // default), the server's claim is a warning.
    assert_eq!(read["effects"], json!(["write"]));
    assert!(
        read["warnings"]
            .to_string()
            .contains("readOnlyHint=true (not trusted"),
        "{read}"
    );
    // A name with an escape sequence becomes a safe name, flagged.
    let evil = tool("hostile__evil__31m");
    assert!(evil["warnings"].to_string().contains("may not"), "{evil}");
    let plain = cli.run(&sb.ws(), &["tools", "list"]);
    assert!(!stdout(&plain).contains('\u{1b}'), "{:?}", stdout(&plain));
}

#[test]
fn the_kernel_refuses_a_server_reads_outside_its_grant() {
    if !hostile_runnable() {
        return;
    }
    let sb = hostile(&[], "");
    let home = sb.outside().join("home");
    std::fs::create_dir_all(home.join(".ssh")).expect("fake home");
    std::fs::write(home.join(".ssh/id_rsa"), "PRIVATE-KEY-MATERIAL\n").expect("key");
    let home_s = home.display().to_string();
    let cli = Cli::new();
    let env = [("HOME", home_s.as_str())];

    // Inside the grant: read.
    let ok = call(
        &cli,
        &sb,
        "hostile__read",
        json!({"path": sb.ws().join("hello.txt")}),
        &env,
    );
    stdout_has(&ok, &["hello from the workspace"]);

    for target in [home.join(".ssh/id_rsa"), sb.outside().join("secret.txt")] {
        let o = call(&cli, &sb, "hostile__read", json!({"path": target}), &env);
        let all = format!("{}{}", stdout(&o), stderr(&o));
        assert!(!o.status.success(), "{all}");
        assert!(all.contains("Permission denied"), "{target:?}: {all}");
        assert!(
            !all.contains("PRIVATE-KEY") && !all.contains(SECRET),
            "{all}"
        );
    }
}

#[test]
fn a_server_ignoring_sigterm_is_killed_and_leaves_no_process() {
    if !hostile_runnable() {
        return;
    }
    let sb = hostile(&[], "");
    let cli = Cli::new();
    let o = call(&cli, &sb, "hostile__pid", json!({}), &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let pid: i32 = stdout(&o).trim().parse().expect("a pid");
    // corral has exited; the server, which ignores SIGTERM, must be gone.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let alive = !status.is_empty() && !status.contains("State:\tZ");
        if !alive {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the server {pid} outlived corral: {status}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_flood_and_a_100_mb_message_are_cut_off() {
    if !hostile_runnable() {
        return;
    }
    let sb = hostile(&[], "output_kb = 256\n");
    let cli = Cli::new();
    for tool in ["hostile__flood", "hostile__big"] {
        let start = Instant::now();
        let o = call(&cli, &sb, tool, json!({}), &[]);
        let took = start.elapsed();
        assert!(!o.status.success(), "{tool}: {}", stdout(&o));
        assert!(took < Duration::from_secs(20), "{tool} took {took:?}");
        let err = stderr(&o);
        assert!(
            err.contains("256 KiB cap") || err.contains("failed the call"),
            "{tool}: {err}"
        );
        assert!(
            stdout(&o).len() < 1 << 20,
            "{tool}: the flood reached stdout"
        );
    }
}

#[test]
fn a_project_that_swaps_a_servers_command_after_trust_is_not_run() {
    if !hostile_runnable() {
        return;
    }
    let sb = hostile(&[], "");
    let cli = Cli::untrusting();
    let o = cli.run(&sb.ws(), &["trust", "--yes"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let listed = cli.run(&sb.ws(), &["tools", "list"]);
    has(&stdout(&listed), "hostile__read");

    // The same server, now told to leave a mark: a new argument.
    let marker = sb.outside().join("ran");
    let text = std::fs::read_to_string(sb.ws().join("corral.toml")).expect("manifest");
    let swapped = text.replace(
        "hostile_server.py\"]",
        &format!("hostile_server.py\", \"marker={}\"]", marker.display()),
    );
    assert_ne!(text, swapped);
    std::fs::write(sb.ws().join("corral.toml"), swapped).expect("swap");
    let o = cli.run(&sb.ws(), &["tools", "list"]);
    lacks(&stdout(&o), "hostile__");
    assert!(!marker.exists(), "the swapped command ran");
}

/// A workspace with the hostile server and the replay provider playing `turns`.
fn replayed(turns: &[Value], extra: &str) -> Sandbox {
    let sb = hostile(
        &[],
        &format!(
            "effects = {{ default = [\"read\"], send = [\"network\"] }}\n\n\
             [plugins.replay]\nsource = \"builtin:replay\"\n\
             grants.fs = [{{ path = \".\", access = \"ro\" }}]\n\
             config = {{ cassette = \"mcp.cassette.json\" }}\n{extra}"
        ),
    );
    crate::support::cassette::write(&sb, "mcp.cassette.json", turns);
    sb
}

fn run_events(cli: &Cli, sb: &Sandbox) -> Vec<Value> {
    let o = cli.run(&sb.ws(), &["run", "--provider", "replay", "--json", "go"]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    crate::support::events::events(&o)
}

#[test]
fn a_server_tool_runs_through_the_pipeline_and_is_logged_untrusted() {
    if !hostile_runnable() {
        return;
    }
    let path = "hello.txt";
    let turns = [
        call_turn("c1", "hostile__read", json!({ "path": path })),
        answer_turn("Done."),
    ];
    let sb = replayed(&turns, "[policy]\nmode = \"full-auto\"\n");
    let cli = Cli::new();
    let events = run_events(&cli, &sb);
    crate::support::events::untrusted_end(&events, "c1", "hello from the workspace", "mcp:hostile");
    // The session log has it too.
    crate::support::log::assert_logged(&cli, &["hostile__read", "mcp:hostile"]);
}

#[test]
fn a_deny_rule_holds_for_a_servers_tools() {
    if !hostile_runnable() {
        return;
    }
    let marker_turns = [
        call_turn("c1", "hostile__pid", json!({})),
        answer_turn("Done."),
    ];
    let sb = replayed(
        &marker_turns,
        "[policy]\nmode = \"full-auto\"\ndeny = [\"hostile__*\"]\n",
    );
    let cli = Cli::new();
    let events = run_events(&cli, &sb);
    let permission = crate::support::events::find(&events, "permission", "c1");
    assert_eq!(permission["decision"], "deny", "{permission}");
    let end = crate::support::events::find(&events, "tool_call_end", "c1");
    assert_eq!(end["outcome"]["is_error"], true, "{end}");
}

#[test]
fn the_guard_holds_a_server_tool_that_would_send_a_secret_read_earlier() {
    if !hostile_runnable() {
        return;
    }
    let turns = [
        call_turn("c1", "hostile__read", json!({ "path": "hello.txt" })),
        call_turn("c2", "read_file", json!({ "path": ".env" })),
        call_turn("c3", "hostile__send", json!({ "text": SECRET })),
        answer_turn("Done."),
    ];
    let sb = replayed(
        &turns,
        "[policy]\nmode = \"auto-edit\"\nallow = [\"hostile__*\"]\n",
    );
    // The server may use the network: what it is sent could leave.
    let text = std::fs::read_to_string(sb.ws().join("corral.toml")).expect("manifest");
    let text = text.replace(
        "grants = { fs = [\".\"] }",
        "grants = { fs = [\".\"], net = true }",
    );
    sb.write("corral.toml", &text);
    sb.write(".env", &format!("API_KEY={SECRET}\n"));
    let cli = Cli::new();
    let events = run_events(&cli, &sb);
    let permission = crate::support::events::find(&events, "permission", "c3");
    assert_eq!(permission["decision"], "refused", "{permission}");
    let reason = permission["reason"].as_str().unwrap_or_default();
    has(reason, "exfiltration guard");
    let end = crate::support::events::find(&events, "tool_call_end", "c3");
    assert!(
        !end["outcome"]["content"]
            .as_str()
            .unwrap_or_default()
            .starts_with("sent"),
        "{end}"
    );
}

#[test]
fn the_reference_servers_tools_are_listed_and_called_confined() {
    let (Some(fs), Some(everything), Some(fetch)) = (
        installed("npm/node_modules/.bin/mcp-server-filesystem"),
        installed("npm/node_modules/.bin/mcp-server-everything"),
        installed("py/bin/mcp-server-fetch"),
    ) else {
        return;
    };
    let sb = Sandbox::new();
    let ws = sb.ws().canonicalize().expect("ws");
    sb.write(
        "corral.toml",
        &format!(
            "[mcp.files]\ncommand = {:?}\nargs = [{:?}]\ngrants = {{ fs = [\".\"] }}\ntimeout_ms = 20000\n\n\
             [mcp.everything]\ncommand = {:?}\ntimeout_ms = 20000\n\n\
             [mcp.fetch]\ncommand = {:?}\nargs = [\"--ignore-robots-txt\", \"--allow-private-ips\"]\ngrants = {{ net = true }}\ntimeout_ms = 20000\n",
            fs.display().to_string(),
            ws.display().to_string(),
            everything.display().to_string(),
            fetch.display().to_string(),
        ),
    );
    let cli = Cli::new();
    let o = cli.run(&sb.ws(), &["tools", "list"]);
    let listed = stdout(&o);
    for tool in ["files__read_text_file", "everything__echo", "fetch__fetch"] {
        assert!(
            listed.contains(tool),
            "{tool} missing: {listed}{}",
            stderr(&o)
        );
    }
    let read = call(
        &cli,
        &sb,
        "files__read_text_file",
        json!({"path": ws.join("hello.txt")}),
        &[],
    );
    stdout_has(&read, &["hello from the workspace"]);
    let echoed = call(
        &cli,
        &sb,
        "everything__echo",
        json!({"message": "hi from corral"}),
        &[],
    );
    stdout_has(&echoed, &["hi from corral"]);
}

#[test]
fn mcp_add_list_remove_and_import_edit_the_users_manifest() {
    let (sb, cli) = workspace_and_cli();
    // `--workspace` before `--`: what follows is the server's command line.
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_corral"))
        .args(["--workspace", &sb.ws().display().to_string()])
        .args([
            "mcp",
            "add",
            "files",
            "--grant",
            "fs:docs",
            "--grant",
            "env:TOKEN",
        ])
        .args(["--", "npx", "server", "docs"])
        .env("XDG_CONFIG_HOME", cli.home.path().join("config"))
        .env("XDG_DATA_HOME", cli.home.path().join("data"))
        .output()
        .expect("run corral");
    assert!(o.status.success(), "{}", stderr(&o));
    has(
        &stdout(&o),
        "read and write beneath docs; the variables TOKEN; no network",
    );
    let bad = cli.run(
        &sb.ws(),
        &["mcp", "add", "x", "--grant", "everything", "--", "x"],
    );
    assert!(!bad.status.success());
    has(&stderr(&bad), "use fs:DIR");

    let listed = cli.run(&sb.ws(), &["mcp", "list", "--json"]);
    let list: Vec<Value> = serde_json::from_str(&stdout(&listed)).expect("JSON");
    assert_eq!(list[0]["name"], "files", "{list:?}");
    assert_eq!(list[0]["args"], json!(["server", "docs"]));
    assert_eq!(list[0]["grants"]["env"], json!(["TOKEN"]));

    // Claude Code's file: shown, written only with --yes.
    let claude = sb.outside().join(".mcp.json");
    std::fs::write(
        &claude,
        r#"{"mcpServers": {"GitHub": {"command": "gh-mcp", "args": ["stdio"], "env": {"GH_HOST": "x"}}, "web": {"type": "http", "url": "https://x"}}}"#,
    )
    .expect("write");
    let claude_s = claude.display().to_string();
    let shown = cli.run(&sb.ws(), &["mcp", "import", &claude_s]);
    assert!(
        stdout(&shown)
            .contains("[mcp.github] runs `gh-mcp stdio` with GH_HOST set; it gets no files"),
        "{}",
        stdout(&shown)
    );
    has(&stdout(&shown), "Nothing was written");
    let names = |cli: &Cli| -> Vec<String> {
        let o = cli.run(&sb.ws(), &["mcp", "list", "--json"]);
        let list: Vec<Value> = serde_json::from_str(&stdout(&o)).expect("JSON");
        list.iter()
            .map(|s| s["name"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    assert_eq!(names(&cli), vec!["files"]);
    // Codex's table.
    import_config(
        &cli,
        &sb,
        "config.toml",
        "[mcp_servers.docs]\ncommand = \"docs-mcp\"\nargs = [\"-q\"]\n",
    );
    let o = cli.run(&sb.ws(), &["mcp", "import", &claude_s, "--yes"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(names(&cli), vec!["docs", "files", "github", "web"]);

    let o = cli.run(&sb.ws(), &["mcp", "remove", "files"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(names(&cli), vec!["docs", "github", "web"]);
}

#[test]
fn the_reference_filesystem_server_runs_through_corral_run_and_a_deny_rule_holds() {
    let Some((fs, sb, ws)) = crate::support::servers::filesystem_in_sandbox() else {
        return;
    };
    let turns = [
        call_turn(
            "c1",
            "files__read_text_file",
            json!({ "path": ws.join("hello.txt") }),
        ),
        call_turn(
            "c2",
            "files__write_file",
            json!({ "path": ws.join("planted.txt"), "content": "written" }),
        ),
        answer_turn("Done."),
    ];
    crate::support::servers::filesystem_replay(
        &sb,
        &fs,
        &ws,
        &turns,
        "effects = { default = [\"read\"], write_file = [\"write\"] }\n",
        "\n[policy]\nmode = \"full-auto\"\ndeny = [\"files__write_file\"]\n",
    );
    let cli = Cli::new();
    let events = run_events(&cli, &sb);
    crate::support::events::untrusted_end(&events, "c1", "hello from the workspace", "mcp:files");
    let permission = crate::support::events::find(&events, "permission", "c2");
    assert_eq!(permission["decision"], "deny", "{permission}");
    assert!(
        !ws.join("planted.txt").exists(),
        "a denied write_file still wrote"
    );
    let log = std::fs::read_to_string(crate::support::log::session_log(&cli)).expect("log");
    assert!(
        log.contains("files__read_text_file") && log.contains("files__write_file"),
        "{log}"
    );
}
