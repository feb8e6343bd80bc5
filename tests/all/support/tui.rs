//! The interactive UI in a real terminal: a tmux pane of its own server
//! running a shell command (usually the binary under test, started by
//! [`ui_command`]), keys sent and the screen read back.

use crate::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// How long any one screen may take to appear.
pub const SCREEN_TIMEOUT: Duration = Duration::from_secs(90);

/// A tmux server on a private socket, killed when dropped.
pub struct Pane {
    socket: PathBuf,
    _dir: tempfile::TempDir,
}

impl Pane {
    /// The pid of the program the pane's shell runs (corral).
    pub fn corral_pid(&self) -> String {
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
    pub fn start(command: &str) -> Option<Self> {
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

    pub fn tmux(&self) -> Command {
        let mut cmd = Command::new("tmux");
        cmd.arg("-S").arg(&self.socket).env_remove("TMUX");
        cmd
    }

    /// What the pane shows now.
    pub fn screen(&self) -> String {
        let out = self
            .tmux()
            .args(["capture-pane", "-p", "-t", "ui"])
            .output()
            .expect("capture-pane");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// What the pane shows now and its scrollback above it.
    pub fn scrollback(&self) -> String {
        let out = self
            .tmux()
            .args(["capture-pane", "-p", "-S", "-", "-t", "ui"])
            .output()
            .expect("capture-pane");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Types `text` literally.
    pub fn type_text(&self, text: &str) {
        let ok = self
            .tmux()
            .args(["send-keys", "-t", "ui", "-l", text])
            .status()
            .expect("send-keys");
        assert!(ok.success());
    }

    /// Presses named keys (`Enter`, `Escape`, `C-c`).
    pub fn press(&self, key: &str) {
        let ok = self
            .tmux()
            .args(["send-keys", "-t", "ui", key])
            .status()
            .expect("send-keys");
        assert!(ok.success());
    }

    /// Polls the screen until `ready` holds for it, and returns it.
    pub fn wait(&self, what: &str, ready: impl Fn(&str) -> bool) -> String {
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

    /// Types `text` and presses Enter.
    pub fn submit(&self, text: &str) {
        self.type_text(text);
        self.press("Enter");
    }

    /// Starts `command` as [`Pane::start`] does and waits for the UI's
    /// empty prompt ("ask anything").
    pub fn ready(command: &str) -> Option<Self> {
        let pane = Self::start(command)?;
        pane.wait_for("ask anything");
        Some(pane)
    }

    pub fn wait_for(&self, text: &str) -> String {
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
pub fn assert_restored(pane: &Pane) {
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
pub fn ui_command(cli: &Cli, workspace: &Path, after: &str) -> String {
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

pub fn quote(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', r"'\''"))
}

/// Trusts the workspace's manifest as a user would before the first run:
/// by a `corral sessions`, which must succeed.
pub fn trust(cli: &Cli, sb: &Sandbox) {
    let o = cli.run(&sb.ws(), &["sessions"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// The UI in `sb`'s workspace (see [`ui_command`], the pane kept open after
/// exit) once its project is trusted ([`trust`]), at its empty prompt;
/// `None` where tmux is missing, as [`Pane::ready`].
pub fn trusted_pane(cli: &Cli, sb: &Sandbox) -> Option<Pane> {
    Pane::ready(&trusted_command(cli, sb, "sleep 600"))
}

/// [`ui_command`] in `sb`'s workspace, then `after`, once its project is
/// trusted ([`trust`]).
pub fn trusted_command(cli: &Cli, sb: &Sandbox, after: &str) -> String {
    trust(cli, sb);
    ui_command(cli, &sb.ws(), after)
}

/// The manifest the UI tests play a cassette with: the `replay` provider
/// reading `c.json` in the workspace, `more` entries of its config after
/// the cassette's (e.g. `, delay_ms = 5`), and a `[policy]` table of
/// `policy` where that is not empty.
pub fn replay_manifest(policy: &str, more: &str) -> String {
    let policy = if policy.is_empty() {
        String::new()
    } else {
        format!("[policy]\n{policy}\n\n")
    };
    format!(
        "[agent]\nprovider = \"replay\"\n\n{policy}[plugins.replay]\nsource = \"builtin:replay\"\n\
         grants.fs = [{{ path = \".\", access = \"ro\" }}]\n\
         config = {{ cassette = \"c.json\"{more} }}\n"
    )
}
