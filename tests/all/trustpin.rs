//! What was trusted is what runs: `corral trust` approves the exact plugin
//! files a project manifest names, and one component declared many times is
//! loaded once. Driven through the `corral` binary.

use crate::support::files::{place, sha256_of};
use crate::support::output::{stderr, stdout};
use crate::support::text::{has, lacks};
use crate::*;
use corral_test_programs::{ECHO, TRUSTPIN};
use sha2::Digest as _;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Runs `cmd`, killing it if it is still running after `limit`: a guard
/// against a hang, not a measurement.
fn run_bounded(cmd: &mut Command, limit: Duration) -> Output {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn corral");
    let started = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("corral was still running after {limit:?}; it hangs");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

/// `corral tool call echo` with `text`.
fn echo(cli: &Cli, sb: &Sandbox, text: &str) -> std::process::Output {
    crate::support::run::tool_call(cli, sb, "echo", serde_json::json!({ "text": text }))
}

/// A workspace with the component `wasm` placed at `rel` and the
/// manifest `toml`.
fn placed(wasm: &str, rel: &str, toml: &str) -> Sandbox {
    let sb = Sandbox::new();
    place(&sb, wasm, rel);
    sb.write("corral.toml", toml);
    sb
}

#[test]
fn a_swapped_wasm_is_refused_until_trusted_again() {
    let sb = placed(
        ECHO,
        "tools/echo.wasm",
        "[plugins.echo]\nsource = \"tools/echo.wasm\"\ngrants.fs = [{ path = \".\", access = \"rw\" }]\n",
    );
    let cli = Cli::untrusting();
    let trusted = sha256_of(ECHO);
    let o = cli.run(&sb.ws(), &["trust", "--yes"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let review = stdout(&o);
    assert!(
        review.contains(&format!(
            "  echo  {}",
            sb.ws().join("tools/echo.wasm").display()
        )),
        "the review names the plugin and its file: {review}"
    );
    assert!(
        review.contains(&format!("sha256 {trusted}")),
        "the review shows the hash it approves: {review}"
    );
    let o = echo(&cli, &sb, "hi");
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "hi\n");
    let o = cli.run(&sb.ws(), &["plugins", "list"]);
    has(
        &stdout(&o),
        format!("sha256   {trusted} (approved by corral trust)"),
    );

    // Someone swaps the component; corral.toml itself is unchanged.
    place(&sb, TRUSTPIN, "tools/echo.wasm");
    let swapped = sha256_of(TRUSTPIN);
    for args in [
        &["tools", "list"][..],
        &["tool", "call", "echo", "--args", r#"{"text":"hi"}"#],
        &["tool", "call", "named"],
    ] {
        let o = cli.run(&sb.ws(), args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stdout(&o));
        let err = stderr(&o);
        assert!(
            err.contains("plugin `echo` (")
                && err.contains("changed since you trusted")
                && err.contains(&format!("its sha256 was {trusted} and is now {swapped}"))
                && err.contains("run `corral trust`"),
            "{args:?}: {err}"
        );
        assert!(!stdout(&o).contains("named"), "the new code ran");
    }

    // The review says which file changed, from what to what.
    let o = cli.run(&sb.ws(), &["trust"]);
    assert_eq!(o.status.code(), Some(2), "no terminal, no --yes");
    let review = stdout(&o);
    assert!(
        review.contains("is unchanged, but plugin files it names changed since you trusted it")
            && review.contains("plugin `echo`: ")
            && review.contains(&format!("was sha256 {trusted}"))
            && review.contains(&format!("now sha256 {swapped}")),
        "{review}"
    );
    let o = cli.run(&sb.ws(), &["tools", "list"]);
    assert_eq!(o.status.code(), Some(2), "still refused: {}", stdout(&o));

    let o = cli.run(&sb.ws(), &["trust", "--yes"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = cli.run(&sb.ws(), &["tool", "call", "named"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "named\n");
    let o = cli.run(&sb.ws(), &["trust"]);
    has(&stdout(&o), "is already trusted");
}

#[test]
fn a_pinned_wasm_is_covered_by_its_pin() {
    let sb = Sandbox::new();
    place(&sb, ECHO, "tools/echo.wasm");
    let pin = sha256_of(ECHO);
    sb.write(
        "corral.toml",
        &format!("[plugins.echo]\nsource = \"tools/echo.wasm\"\nsha256 = \"{pin}\"\n"),
    );
    let cli = Cli::untrusting();
    let o = cli.run(&sb.ws(), &["trust", "--yes"]);
    assert!(o.status.success(), "{}", stderr(&o));
    has(
        &stdout(&o),
        format!("sha256 {pin} (pinned by the manifest)"),
    );
    let o = echo(&cli, &sb, "pinned");
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "pinned\n");
    let o = cli.run(&sb.ws(), &["plugins", "list"]);
    has(&stdout(&o), format!("sha256   {pin} (pinned)"));
    // The pin, not the trust record, speaks for a pinned file.
    place(&sb, TRUSTPIN, "tools/echo.wasm");
    let o = cli.run(&sb.ws(), &["tools", "list"]);
    assert_eq!(o.status.code(), Some(2));
    has(&stderr(&o), format!("but the manifest pins {pin}"));
}

#[test]
fn the_users_own_plugins_need_no_trust() {
    let sb = Sandbox::new();
    let cli = Cli::untrusting();
    let config = cli.home.path().join("config/corral");
    std::fs::create_dir_all(&config).expect("config dir");
    std::fs::copy(ECHO, config.join("mine.wasm")).expect("copy");
    std::fs::write(
        config.join("corral.toml"),
        "[plugins.mine]\nsource = \"mine.wasm\"\n",
    )
    .expect("user manifest");
    let o = echo(&cli, &sb, "a");
    assert!(o.status.success(), "{}", stderr(&o));
    std::fs::copy(TRUSTPIN, config.join("mine.wasm")).expect("replace");
    let o = cli.run(&sb.ws(), &["tool", "call", "named"]);
    assert!(o.status.success(), "{}", stderr(&o));
    // A trusted project manifest beside it does not make the user's files its own.
    sb.write("corral.toml", "[policy]\nmode = \"ask\"\n");
    let o = cli.run(&sb.ws(), &["trust", "--yes"]);
    assert!(o.status.success(), "{}", stderr(&o));
    lacks(&stdout(&o), "Plugin files");
    std::fs::copy(ECHO, config.join("mine.wasm")).expect("replace");
    let o = echo(&cli, &sb, "b");
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn a_symlinked_wasm_shows_its_target_and_is_checked_by_content() {
    let sb = Sandbox::new();
    let target = sb.outside().join("echo.wasm");
    std::fs::copy(ECHO, &target).expect("copy");
    std::fs::create_dir_all(sb.ws().join("tools")).expect("mkdir");
    std::os::unix::fs::symlink(&target, sb.ws().join("tools/echo.wasm")).expect("symlink");
    sb.write(
        "corral.toml",
        "[plugins.echo]\nsource = \"tools/echo.wasm\"\n",
    );
    let cli = Cli::untrusting();
    let o = cli.run(&sb.ws(), &["trust", "--yes"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let real = target.canonicalize().expect("canonical");
    assert!(
        stdout(&o).contains(&format!(
            "tools/echo.wasm -> {} (outside the workspace)",
            real.display()
        )),
        "{}",
        stdout(&o)
    );
    let o = echo(&cli, &sb, "ok");
    assert!(o.status.success(), "{}", stderr(&o));
    // Changing what the link points at changes what would run.
    std::fs::copy(TRUSTPIN, &target).expect("replace target");
    let o = cli.run(&sb.ws(), &["tools", "list"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("plugin `echo` (") && stderr(&o).contains("run `corral trust`"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_file_missing_at_trust_time_is_not_approved() {
    let sb = Sandbox::with_manifest("[plugins.echo]\nsource = \"tools/echo.wasm\"\n");
    let cli = Cli::untrusting();
    let o = cli.run(&sb.ws(), &["trust", "--yes"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("cannot be read (")
            && stdout(&o).contains("it will not load until you trust again"),
        "{}",
        stdout(&o)
    );
    place(&sb, ECHO, "tools/echo.wasm");
    let o = cli.run(&sb.ws(), &["tools", "list"]);
    assert_eq!(o.status.code(), Some(2), "{}", stdout(&o));
    assert!(
        stderr(&o).contains("plugin `echo` (")
            && stderr(&o).contains("was not approved when you trusted")
            && stderr(&o).contains("run `corral trust`"),
        "{}",
        stderr(&o)
    );
    let o = cli.run(&sb.ws(), &["trust", "--yes"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = echo(&cli, &sb, "now");
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn a_trust_record_without_plugin_files_approves_none() {
    let sb = Sandbox::new();
    place(&sb, ECHO, "tools/echo.wasm");
    let text = "[plugins.echo]\nsource = \"tools/echo.wasm\"\n";
    sb.write("corral.toml", text);
    let cli = Cli::untrusting();
    // A record in the format that held only the manifest's hash.
    let store = cli.home.path().join("data/corral/trust");
    std::fs::create_dir_all(&store).expect("store");
    let manifest = sb
        .ws()
        .join("corral.toml")
        .canonicalize()
        .expect("canonical");
    let index = serde_json::json!({
        "trusted": { manifest.display().to_string(): hex::encode(sha2::Sha256::digest(text)) }
    });
    std::fs::write(store.join("index.json"), index.to_string()).expect("index");
    let o = cli.run(&sb.ws(), &["tools", "list"]);
    assert_eq!(o.status.code(), Some(2), "{}", stdout(&o));
    assert!(
        stderr(&o).contains("plugin `echo` (")
            && stderr(&o).contains("was not approved when you trusted"),
        "{}",
        stderr(&o)
    );
    let o = cli.run(&sb.ws(), &["trust", "--yes"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("now sha256 ") && stdout(&o).contains("was sha256 (none approved)"),
        "{}",
        stdout(&o)
    );
    let o = echo(&cli, &sb, "x");
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn a_fifo_named_as_a_wasm_is_refused_without_hanging() {
    let sb = Sandbox::new();
    std::fs::create_dir_all(sb.ws().join("tools")).expect("mkdir");
    let fifo = std::ffi::CString::new(
        sb.ws()
            .join("tools/pipe.wasm")
            .into_os_string()
            .into_encoded_bytes(),
    )
    .expect("path");
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0, "mkfifo");
    sb.write(
        "corral.toml",
        "[plugins.pipe]\nsource = \"tools/pipe.wasm\"\n",
    );
    let cli = Cli::untrusting();
    let limit = Duration::from_secs(60);
    let o = run_bounded(&mut cli.command(&sb.ws(), &["trust", "--yes"]), limit);
    assert!(o.status.success(), "{}", stderr(&o));
    has(
        &stdout(&o),
        "cannot be read (it is a FIFO (named pipe), not a regular file)",
    );
    let o = run_bounded(&mut cli.command(&sb.ws(), &["tools", "list"]), limit);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("plugin `pipe` (") && stderr(&o).contains("not a regular file"),
        "{}",
        stderr(&o)
    );
}

/// `n` entries of the test component that names its tool from `config`.
fn entries(n: usize, rest: impl Fn(usize) -> String) -> String {
    (0..n)
        .map(|i| {
            format!(
                "[plugins.n{i:02}]\nsource = \"tools/named.wasm\"\n{}\n",
                rest(i)
            )
        })
        .collect()
}

#[test]
fn fifty_entries_of_one_component_share_it() {
    let sb = placed(
        TRUSTPIN,
        "tools/named.wasm",
        &entries(50, |i| {
            format!("config = {{ tool = \"tool_{i:02}\", reply = \"reply {i}\" }}")
        }),
    );
    let cli = Cli::new();
    let o = cli.run(&sb.ws(), &["-v", "tools", "list", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let tools: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("json");
    let ours = tools
        .as_array()
        .expect("list")
        .iter()
        .filter(|t| t["name"].as_str().is_some_and(|n| n.starts_with("tool_")))
        .count();
    assert_eq!(ours, 50);
    // One component, loaded once for all fifty entries.
    let log = stderr(&o);
    let loads = log
        .lines()
        .filter(|l| {
            (l.contains("compile cache hit") || l.contains("compiled (")) && l.contains("plugin=n")
        })
        .count();
    assert_eq!(loads, 1, "{log}");
    let o = cli.run(&sb.ws(), &["tool", "call", "tool_37"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "reply 37\n");
}

#[test]
fn identical_entries_clash_before_the_others_run() {
    let sb = placed(
        TRUSTPIN,
        "tools/named.wasm",
        &entries(50, |_| "config = { describe_log = \"yes\" }".into()),
    );
    let cli = Cli::new();
    let o = cli.run(&sb.ws(), &["-v", "tools", "list"]);
    assert_eq!(o.status.code(), Some(2), "{}", stdout(&o));
    let err = stderr(&o);
    assert!(
        err.contains("tool `named` is exported by two plugins: `n00` (")
            && err.contains("and `n01` (")
            && err.contains(&format!(
                "which run the same component (sha256 {}) with the same settings",
                sha256_of(TRUSTPIN)
            )),
        "{err}"
    );
    // Only one of the fifty was instantiated to learn that.
    assert_eq!(err.matches("described named").count(), 1, "{err}");
}
