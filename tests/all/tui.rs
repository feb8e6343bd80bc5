//! The interactive UI, driven as a user drives it: the real `corral` binary
//! in a terminal (a tmux pane of its own server), the replay provider
//! playing a cassette, keys sent and the screen read back.

use crate::support::cassette::{self, streamed_turn};
use crate::*;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// How long any one screen may take to appear.
pub(crate) const SCREEN_TIMEOUT: Duration = Duration::from_secs(90);

/// A tmux server on a private socket, killed when dropped.
pub(crate) struct Pane {
    socket: PathBuf,
    _dir: tempfile::TempDir,
}

impl Pane {
    /// The pid of the program the pane's shell runs (corral).
    pub(crate) fn corral_pid(&self) -> String {
        let out = self
            .tmux()
            .args(["display", "-p", "-t", "ui", "#{pane_pid}"])
            .output()
            .expect("pane pid");
        let shell = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        let children = std::fs::read_to_string(format!("/proc/{shell}/task/{shell}/children"))
            .expect("the shell's children");
        children
            .split_whitespace()
            .next()
            .expect("corral runs")
            .to_owned()
    }

    /// Starts `command` (a shell command line) in a 100×30 pane.
    pub(crate) fn start(command: &str) -> Option<Self> {
        if Command::new("tmux").arg("-V").output().is_err() {
            crate::support::skip::missing("tmux is not installed", "apt-get install tmux");
            return None;
        }
        let dir = tempfile::tempdir().expect("socket dir");
        let pane = Pane {
            socket: dir.path().join("tmux.sock"),
            _dir: dir,
        };
        let status = pane
            .tmux()
            .args([
                "new-session",
                "-d",
                "-x",
                "100",
                "-y",
                "30",
                "-s",
                "ui",
                command,
            ])
            .status()
            .expect("tmux new-session");
        assert!(status.success(), "tmux new-session failed");
        Some(pane)
    }

    pub(crate) fn tmux(&self) -> Command {
        let mut cmd = Command::new("tmux");
        cmd.arg("-S").arg(&self.socket).env_remove("TMUX");
        cmd
    }

    /// What the pane shows now.
    pub(crate) fn screen(&self) -> String {
        let out = self
            .tmux()
            .args(["capture-pane", "-p", "-t", "ui"])
            .output()
            .expect("capture-pane");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// What the pane shows now and its scrollback above it.
    pub(crate) fn scrollback(&self) -> String {
        let out = self
            .tmux()
            .args(["capture-pane", "-p", "-S", "-", "-t", "ui"])
            .output()
            .expect("capture-pane");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Types `text` literally.
    pub(crate) fn type_text(&self, text: &str) {
        let ok = self
            .tmux()
            .args(["send-keys", "-t", "ui", "-l", text])
            .status()
            .expect("send-keys");
        assert!(ok.success());
    }

    /// Presses named keys (`Enter`, `Escape`, `C-c`).
    pub(crate) fn press(&self, key: &str) {
        let ok = self
            .tmux()
            .args(["send-keys", "-t", "ui", key])
            .status()
            .expect("send-keys");
        assert!(ok.success());
    }

    /// Polls the screen until `ready` holds for it, and returns it.
    pub(crate) fn wait(&self, what: &str, ready: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            if ready(&screen) {
                return screen;
            }
            assert!(
                start.elapsed() < SCREEN_TIMEOUT,
                "timed out waiting for {what}; the screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub(crate) fn wait_for(&self, text: &str) -> String {
        self.wait(&format!("`{text}`"), |s| s.contains(text))
    }
}

impl Drop for Pane {
    fn drop(&mut self) {
        let _ = self.tmux().arg("kill-server").status();
    }
}

/// The terminal is out of raw mode once corral exits: `stty -a`, run
/// after it, reports canonical input and echo back on.
pub(crate) fn assert_restored(pane: &Pane) {
    let screen = pane.wait("`stty -a` output", |s| s.contains("icanon"));
    let flags: Vec<&str> = screen.split_whitespace().collect();
    for flag in ["icanon", "echo"] {
        assert!(
            flags.contains(&flag) && !flags.contains(&format!("-{flag}").as_str()),
            "the terminal was left without {flag}:\n{screen}"
        );
    }
}

/// The shell command that starts the UI of the binary under test in
/// `workspace` with `cli`'s homes and no provider keys, then runs `after`
/// (`sleep 600` keeps the pane open, so the screen can be read after exit).
pub(crate) fn ui_command(cli: &Cli, workspace: &Path, after: &str) -> String {
    let home = cli.home.path();
    format!(
        "env -u CORRAL_LOG -u OPENAI_API_KEY -u ANTHROPIC_API_KEY TERM=xterm-256color \
         XDG_CONFIG_HOME={} XDG_CACHE_HOME={} XDG_DATA_HOME={} {} --workspace {}; {after}",
        quote(&home.join("config")),
        quote(&cache_home()),
        quote(&home.join("data")),
        quote(Path::new(env!("CARGO_BIN_EXE_corral"))),
        quote(workspace),
    )
}

pub(crate) fn quote(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', r"'\''"))
}

const PLAN: &str = "## Plan\n\nI will **write** `notes.txt`:\n\n```rust\nfn main() {}\n```\n";

/// A prompt, a streamed answer, a write approved in the modal, a second
/// message, a turn interrupted with Esc, Ctrl-C twice to leave; then the
/// log holds the whole conversation and `corral show` prints it.
#[test]
fn a_session_in_the_terminal_ui() {
    let sb = Sandbox::new();
    let write = json!({
        "id": "w1",
        "name": "write_file",
        "arguments": json!({"path": "notes.txt", "content": "new text\n"}).to_string(),
    });
    let slow = "This answer streams slowly. ".repeat(60);
    let turns = json!([
        streamed_turn(PLAN, vec![write], 3),
        streamed_turn("Wrote notes.txt.", vec![], 3),
        streamed_turn("Second answer.", vec![], 3),
        streamed_turn(&slow, vec![], 2),
    ]);
    cassette::write(&sb, "c.json", &turns);
    sb.write(
        "corral.toml",
        "[agent]\nprovider = \"replay\"\n\n[plugins.replay]\nsource = \"builtin:replay\"\n\
         grants.fs = [{ path = \".\", access = \"ro\" }]\n\
         config = { cassette = \"c.json\", delay_ms = 30 }\n",
    );
    let cli = Cli::new();
    // Trusts the manifest, as a user would before the first run.
    let o = cli.run(&sb.ws(), &["sessions"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    let command = crate::tui::ui_command(
        &cli,
        &sb.ws(),
        "printf '\\nCORRAL-EXIT=%s\\n' $?; stty -a; sleep 600",
    );
    let Some(pane) = Pane::start(&command) else {
        return;
    };
    pane.wait_for("ask anything");

    pane.type_text("hello there");
    pane.press("Enter");
    pane.wait_for("I will write notes.txt");
    pane.wait_for("approve this call?");
    let modal = pane.wait_for("+new text");
    assert!(modal.contains("mode ask"), "{modal}");
    assert!(modal.contains("every write_file call"), "{modal}");
    assert!(!sb.ws().join("notes.txt").exists());
    // Keys typed in the first moments of the modal are dropped on purpose;
    // answer until it takes.
    let start = Instant::now();
    while pane.screen().contains("approve this call?") {
        assert!(start.elapsed() < SCREEN_TIMEOUT, "the modal never took `y`");
        pane.press("y");
        std::thread::sleep(Duration::from_millis(200));
    }
    let screen = pane.wait_for("Wrote notes.txt.");
    assert!(screen.contains("write_file"), "{screen}");
    assert_eq!(
        std::fs::read_to_string(sb.ws().join("notes.txt")).expect("notes.txt written"),
        "new text\n"
    );
    pane.wait_for("ready");

    pane.type_text("second");
    pane.press("Enter");
    pane.wait_for("Second answer.");
    pane.wait_for("ready");

    pane.type_text("slow one");
    pane.press("Enter");
    pane.wait_for("streams slowly");
    pane.press("Escape");
    let screen = pane.wait_for("stopped: interrupted");
    // The session id is on the status line.
    let id = screen
        .lines()
        .last()
        .and_then(|l| l.split(" · ").last())
        .map(|s| s.trim().to_owned())
        .expect("a status line");
    assert!(!id.is_empty(), "{screen}");

    pane.press("C-c");
    pane.wait_for("press Ctrl+C again to quit");
    pane.press("C-c");
    let screen = pane.wait_for("CORRAL-EXIT=");
    assert!(screen.contains("CORRAL-EXIT=0"), "{screen}");
    // The transcript stays in the terminal after the UI's alternate screen
    // is gone, in order, above the shell's next line.
    let back = pane.scrollback();
    let mut rest: &str = &back;
    for expected in [
        "> hello there",
        "Second answer.",
        "> slow one",
        "CORRAL-EXIT=0",
    ] {
        let at = rest
            .find(expected)
            .unwrap_or_else(|| panic!("`{expected}` missing or out of order after exit:\n{back}"));
        rest = &rest[at + expected.len()..];
    }
    drop(pane);

    // `resume --last` on a terminal opens the UI on the session, its
    // transcript shown; Ctrl-D on the empty prompt leaves.
    let resume = command.replace(
        &format!("--workspace {}", quote(&sb.ws())),
        &format!("resume --last --workspace {}", quote(&sb.ws())),
    );
    let pane = Pane::start(&resume).expect("tmux");
    let screen = pane.wait_for("resumed session");
    for shown in ["> slow one", "stopped: interrupted"] {
        let shown = shown.trim_start_matches("> ");
        assert!(screen.contains(shown), "`{shown}` missing:\n{screen}");
    }
    pane.press("C-d");
    let screen = pane.wait_for("CORRAL-EXIT=");
    assert!(screen.contains("CORRAL-EXIT=0"), "{screen}");
    assert_restored(&pane);
    drop(pane);

    // A new session of the same workspace recalls the earlier prompts: Up
    // puts the last one in the empty input.
    let pane = Pane::start(&command).expect("tmux");
    let screen = pane.wait_for("ask anything");
    assert!(!screen.contains("slow one"), "{screen}");
    pane.press("Up");
    pane.wait_for("slow one");
    pane.press("Up");
    pane.wait_for("second");
    pane.press("C-c");
    pane.press("C-d");
    let screen = pane.wait_for("CORRAL-EXIT=");
    assert!(screen.contains("CORRAL-EXIT=0"), "{screen}");
    drop(pane);

    // The log is whole: every event numbered without gaps, the approval and
    // its answer, three stops.
    let o = cli.run(&sb.ws(), &["show", &id, "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let records: Vec<Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON record"))
        .collect();
    for (i, r) in records.iter().enumerate() {
        assert_eq!(r["seq"], json!(i + 1), "{records:#?}");
    }
    let events: Vec<&Value> = records.iter().map(|r| &r["event"]).collect();
    let of =
        |t: &str| -> Vec<&Value> { events.iter().copied().filter(|e| e["type"] == t).collect() };
    let prompts: Vec<&str> = of("user_message")
        .iter()
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    assert_eq!(prompts, ["hello there", "second", "slow one"]);
    let stops: Vec<&str> = of("stop")
        .iter()
        .map(|e| e["reason"].as_str().unwrap())
        .collect();
    assert_eq!(stops, ["final_answer", "final_answer", "interrupted"]);
    assert_eq!(of("approval_requested").len(), 1);
    let permission = of("permission");
    assert_eq!(permission[0]["decision"], "approved", "{permission:#?}");
    assert_eq!(of("tool_call_end").len(), 1);

    // `corral show` prints the same conversation.
    let o = cli.run(&sb.ws(), &["show", &id]);
    let shown = String::from_utf8_lossy(&o.stdout);
    let mut rest: &str = &shown;
    for expected in [
        "> hello there",
        "I will **write** `notes.txt`",
        "write_file",
        "Wrote notes.txt.",
        "> second",
        "Second answer.",
        "> slow one",
    ] {
        let at = rest
            .find(expected)
            .unwrap_or_else(|| panic!("`{expected}` missing or out of order in:\n{shown}"));
        rest = &rest[at + expected.len()..];
    }
}

/// SIGTERM ends the UI with the terminal restored and the session closed.
#[test]
fn sigterm_restores_the_terminal() {
    let sb = Sandbox::new();
    sb.write(
        "c.json",
        &cassette::text(&[streamed_turn("Hi.", vec![], 3)]),
    );
    sb.write(
        "corral.toml",
        "[agent]\nprovider = \"replay\"\n\n[plugins.replay]\nsource = \"builtin:replay\"\n\
         grants.fs = [{ path = \".\", access = \"ro\" }]\n\
         config = { cassette = \"c.json\" }\n",
    );
    let cli = Cli::new();
    let o = cli.run(&sb.ws(), &["sessions"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let home = cli.home.path();
    let command = format!(
        "env XDG_CONFIG_HOME={} XDG_CACHE_HOME={} XDG_DATA_HOME={} {} --workspace {}; \
         printf '\\nCORRAL-EXIT=%s\\n' $?; stty -a; sleep 600",
        quote(&home.join("config")),
        quote(&cache_home()),
        quote(&home.join("data")),
        quote(Path::new(env!("CARGO_BIN_EXE_corral"))),
        quote(&sb.ws()),
    );
    let Some(pane) = Pane::start(&command) else {
        return;
    };
    pane.wait_for("ask anything");
    let corral = &pane.corral_pid();
    let ok = Command::new("kill")
        .args(["-TERM", corral])
        .status()
        .expect("kill");
    assert!(ok.success());
    let screen = pane.wait_for("CORRAL-EXIT=");
    assert!(screen.contains("CORRAL-EXIT=143"), "{screen}");
    assert_restored(&pane);
}
