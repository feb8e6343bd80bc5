//! Answering corral's line approval prompts on a pseudo-terminal, as a
//! person at the terminal does.

use crate::*;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The API key the provider of [`run_on_pty`]'s runs reads.
pub const KEY: (&str, &str) = ("TEST_OPENAI_KEY", "sk-policy-test");

/// The line every approval prompt shows.
pub const PROMPT: &str = "[y] yes, once";

/// A pseudo-terminal for corral's stdin, stdout and stderr, with everything
/// it prints collected as it comes.
pub struct Pty {
    master: std::fs::File,
    slave: Option<OwnedFd>,
    screen: Arc<Mutex<String>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Pty {
    pub fn open() -> Self {
        let (master, slave) = crate::support::pty::open();
        let screen = Arc::new(Mutex::new(String::new()));
        let reader = {
            let screen = screen.clone();
            let mut master = master.try_clone().expect("dup");
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = master.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    screen
                        .lock()
                        .expect("lock")
                        .push_str(&String::from_utf8_lossy(&buf[..n]));
                }
            })
        };
        Self {
            master,
            slave: Some(slave),
            screen,
            reader: Some(reader),
        }
    }

    /// Gives `cmd` the terminal as stdin, stdout and stderr (once).
    pub fn attach(&mut self, cmd: &mut std::process::Command) {
        let slave = self.slave.take().expect("attached once");
        cmd.stdin(slave.try_clone().expect("dup"))
            .stdout(slave.try_clone().expect("dup"))
            .stderr(slave);
    }

    /// What was printed so far.
    pub fn screen(&self) -> String {
        self.screen.lock().expect("lock").clone()
    }

    /// Waits until the screen holds `needle` followed by a `> ` prompt.
    pub fn wait_for(&self, needle: &str, limit: Duration) {
        self.wait_for_nth(needle, 0, Instant::now() + limit);
    }

    fn wait_for_nth(&self, needle: &str, i: usize, deadline: Instant) {
        let prompted = || {
            let text = self.screen.lock().expect("lock");
            text.matches(needle).count() > i
                && text
                    .rsplit(needle)
                    .next()
                    .is_some_and(|tail| tail.contains("> "))
        };
        while !prompted() {
            assert!(
                Instant::now() < deadline,
                "no prompt {}; screen:\n{}",
                i + 1,
                self.screen()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn type_text(&mut self, text: &str) {
        self.master.write_all(text.as_bytes()).expect("answer");
    }

    /// Waits for the last output, then closes the terminal.
    pub fn close(mut self) -> String {
        std::thread::sleep(Duration::from_millis(100));
        let reader = self.reader.take();
        let screen = self.screen.clone();
        drop(self);
        if let Some(r) = reader {
            let _ = r.join();
        }
        screen.lock().expect("lock").clone()
    }
}

/// Runs corral on a pseudo-terminal, answering its approval prompts in turn.
pub fn run_on_pty(cli: &Cli, ws: &Path, args: &[&str], answers: &[&str]) -> (Option<i32>, String) {
    let mut pty = Pty::open();
    let mut cmd = cli.command(ws, args);
    cmd.env(KEY.0, KEY.1);
    pty.attach(&mut cmd);
    let mut child = cmd.spawn().expect("spawn");
    drop(cmd);
    let deadline = Instant::now() + Duration::from_secs(60);
    for (i, answer) in answers.iter().enumerate() {
        // The (i+1)th prompt, complete up to its `> `.
        pty.wait_for_nth(PROMPT, i, deadline);
        pty.type_text(answer);
    }
    let status = child.wait().expect("wait");
    (status.code(), pty.close())
}
