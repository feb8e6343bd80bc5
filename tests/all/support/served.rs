//! `corral mcp serve` spoken to in raw JSON-RPC over pipes: started and
//! initialized as a client would, its stderr kept in a file, and every line
//! it prints parsed as JSON on a channel, so a test can send what no SDK
//! would send and wait for the answers by id.

use crate::*;
use serde_json::{Value, json};
use std::io::{BufRead as _, Write as _};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// `corral mcp serve`, initialized, killed when dropped.
pub struct Served {
    child: Child,
    stdin: Option<ChildStdin>,
    answers: Receiver<Value>,
    /// Every line received so far that a wait did not consume.
    seen: Vec<Value>,
    log: PathBuf,
}

impl Served {
    /// `corral mcp serve ARGS`, initialized by a client that offers no
    /// capabilities.
    pub fn start(cli: &Cli, sb: &Sandbox, args: &[&str]) -> Self {
        Self::start_with(cli, sb, args, json!({}))
    }

    /// `corral mcp serve ARGS`, initialized by a client that offers
    /// `capabilities` (e.g. `{"elicitation": {}}`).
    pub fn start_with(cli: &Cli, sb: &Sandbox, args: &[&str], capabilities: Value) -> Self {
        Self::start_env(cli, sb, args, capabilities, &[])
    }

    /// [`Served::start_with`], the server's environment given `env` (e.g.
    /// a `CORRAL_LOG` filter, its log then read with [`Served::stderr`]).
    pub fn start_env(
        cli: &Cli,
        sb: &Sandbox,
        args: &[&str],
        capabilities: Value,
        env: &[(&str, &str)],
    ) -> Self {
        let log = sb.root.path().join("mcp-stderr.log");
        let mut all = vec!["mcp", "serve"];
        all.extend_from_slice(args);
        let mut child = cli
            .command(&sb.ws(), &all)
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start corral mcp serve");
        let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let (tx, answers) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines() {
                let Ok(line) = line else { break };
                let msg: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("not JSON on stdout ({e}): {line}"));
                if tx.send(msg).is_err() {
                    break;
                }
            }
        });
        let mut served = Self {
            stdin: child.stdin.take(),
            child,
            answers,
            seen: Vec::new(),
            log,
        };
        served.send(
            &json!({"jsonrpc":"2.0","id":"init","method":"initialize","params":{
            "protocolVersion":"2025-06-18","capabilities":capabilities,
            "clientInfo":{"name":"raw","version":"0"}}}),
        );
        served.send(&json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
        let init = served.wait_for(&[json!("init")], Duration::from_secs(30));
        assert!(init[0].get("result").is_some(), "{init:?}");
        served
    }

    pub fn send(&mut self, msg: &Value) {
        self.send_line(&msg.to_string());
    }

    /// Sends `line` as it is, with a newline after it.
    pub fn send_line(&mut self, line: &str) {
        self.send_raw(format!("{line}\n").as_bytes());
    }

    /// Sends `bytes` as they are (a test adds the newlines).
    pub fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
    }

    /// The result of request `id` (`method` with `params`), which must not
    /// be an error.
    pub fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(&json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}));
        let answer = self.wait_for(&[json!(id)], Duration::from_secs(120));
        assert!(answer[0].get("error").is_none(), "{}", answer[0]);
        answer[0]["result"].clone()
    }

    /// Sends `line` and returns the answer to it: the next line that is not
    /// a notification (the server answers nothing else meanwhile).
    pub fn answer_to(&mut self, line: &str) -> Value {
        self.send_line(line);
        self.next_where(|m| m.get("method").is_none())
    }

    /// The next line `wanted` picks within a minute; the lines it passes
    /// over (log notifications) are kept for [`Served::wait_for`].
    pub fn next_where(&mut self, wanted: impl Fn(&Value) -> bool) -> Value {
        let until = Instant::now() + Duration::from_secs(60);
        let mut passed = Vec::new();
        loop {
            let left = until.saturating_duration_since(Instant::now());
            match self.answers.recv_timeout(left) {
                Ok(m) if wanted(&m) => {
                    self.seen.extend(passed);
                    return m;
                }
                Ok(m) => passed.push(m),
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {
                    panic!("no such answer; got {passed:?}; stderr: {}", self.stderr())
                }
            }
        }
    }

    /// The answers to `ids`, in that order; panics naming the missing ones
    /// after `limit`.
    pub fn wait_for(&mut self, ids: &[Value], limit: Duration) -> Vec<Value> {
        let until = Instant::now() + limit;
        let got = &mut self.seen;
        while ids.iter().any(|id| !got.iter().any(|m| &m["id"] == id)) {
            let left = until.saturating_duration_since(Instant::now());
            match self.answers.recv_timeout(left) {
                Ok(m) => got.push(m),
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {
                    let missing: Vec<&Value> = ids
                        .iter()
                        .filter(|id| !got.iter().any(|m| &m["id"] == *id))
                        .collect();
                    panic!(
                        "no answer to {} request(s) {missing:?} after {limit:?}; got {got:?}; stderr: {}",
                        missing.len(),
                        std::fs::read_to_string(&self.log).unwrap_or_default()
                    );
                }
            }
        }
        ids.iter()
            .map(|id| got.iter().find(|m| &m["id"] == id).cloned().unwrap())
            .collect()
    }

    /// What the server logged so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Closes the server's input, as a client that goes away does.
    pub fn close_input(&mut self) {
        drop(self.stdin.take());
    }

    /// Waits up to 30 s for the server to exit.
    pub fn wait_exit(&mut self) {
        let until = Instant::now() + Duration::from_secs(30);
        while self.child.try_wait().unwrap().is_none() {
            assert!(Instant::now() < until, "the server did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Closes the server's input, waits for it to exit, and returns what it
    /// logged.
    pub fn close(mut self) -> String {
        self.close_input();
        self.wait_exit();
        self.stderr()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
