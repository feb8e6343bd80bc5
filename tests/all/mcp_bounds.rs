//! `corral mcp serve` stays within its bounds, spoken to in raw JSON-RPC
//! over pipes: calls beyond the runtime's instance slots wait instead of
//! failing, a request line over the transport's cap is answered with a
//! JSON-RPC error (and the server goes on), and what the server logs cannot
//! forge log lines.

use crate::*;
use corral_test_programs::ADVERSARY;
use serde_json::{Value, json};
use std::io::{BufRead as _, Write as _};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// `corral mcp serve` with its stderr in a file and its answers, parsed,
/// on a channel.
pub(crate) struct Served {
    child: Child,
    stdin: Option<ChildStdin>,
    answers: Receiver<Value>,
    /// Every answer received so far.
    seen: Vec<Value>,
    log: PathBuf,
}

impl Served {
    pub(crate) fn start(cli: &Cli, sb: &Sandbox, args: &[&str]) -> Self {
        let log = sb.root.path().join("mcp-stderr.log");
        let mut all = vec!["mcp", "serve"];
        all.extend_from_slice(args);
        let mut child = cli
            .command(&sb.ws(), &all)
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
                    .unwrap_or_else(|e| panic!("not JSON-RPC on stdout ({e}): {line}"));
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
        served.send(&json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
            "protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}));
        served.send(&json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
        let init = served.wait_for(&[json!(1)], Duration::from_secs(30));
        assert!(init[0].get("result").is_some(), "{init:?}");
        served
    }

    fn send(&mut self, msg: &Value) {
        self.send_raw(format!("{msg}\n").as_bytes());
    }

    pub(crate) fn send_raw(&mut self, line: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(line).unwrap();
        stdin.flush().unwrap();
    }

    /// The answers to `ids`, in that order; panics naming the missing ones
    /// after `limit`.
    pub(crate) fn wait_for(&mut self, ids: &[Value], limit: Duration) -> Vec<Value> {
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

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn close(mut self) -> String {
        drop(self.stdin.take());
        let until = Instant::now() + Duration::from_secs(30);
        while self.child.try_wait().unwrap().is_none() {
            assert!(Instant::now() < until, "the server did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
        self.stderr()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn call(id: u64, name: &str, arguments: Value) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":name,"arguments":arguments}})
}

#[test]
fn a_request_over_the_cap_gets_a_json_rpc_error_and_the_server_goes_on() {
    let sb = Sandbox::new();
    sb.write("hello.txt", "hello\n");
    let cli = Cli::new();
    let mut served = Served::start(&cli, &sb, &[]);
    // The transport's cap (`corral_mcp::MAX_REQUEST_BYTES`, rmcp's own).
    let cap = 16 << 20;
    let mut big = call(7, "write_file", json!({"path": "big.txt", "content": ""})).to_string();
    let filler = "a".repeat(cap + (1 << 20));
    big = big.replace(r#""content":"""#, &format!(r#""content":"{filler}""#));
    served.send_raw(format!("{big}\n").as_bytes());
    // And one with no id the server could read before the cut.
    let no_id = format!(r#"{{"params":{{"x":"{filler}"}},"jsonrpc":"2.0","id":8}}"#);
    served.send_raw(format!("{no_id}\n").as_bytes());
    served.send(&call(9, "read_file", json!({"path": "hello.txt"})));
    let got = served.wait_for(&[json!(7), json!(9)], Duration::from_secs(60));
    let error = &got[0]["error"];
    assert_eq!(error["code"], -32600, "{}", got[0]);
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("limit") && message.contains("MiB"),
        "{message}"
    );
    assert!(
        got[1]["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("hello"),
        "the server stopped serving: {}",
        got[1]
    );
    let null = served.wait_for(&[Value::Null], Duration::from_secs(10));
    assert_eq!(null[0]["error"]["code"], -32600, "{}", null[0]);
    assert!(!sb.ws().join("big.txt").exists());
    let log = served.close();
    assert!(log.contains("over the 16 MiB limit"), "{log}");
}

#[test]
fn calls_beyond_the_instance_slots_wait_for_a_place() {
    let sb = Sandbox::new();
    sb.write(
        "corral.toml",
        &format!(
            "[plugins.adversary]\nsource = {ADVERSARY:?}\n\
             limits = {{ timeout_ms = 1000, memory_mb = 16 }}\n"
        ),
    );
    let cli = Cli::new();
    let mut served = Served::start(&cli, &sb, &[]);
    // 80 calls at once, each holding its instance until its deadline: more
    // than the 64 slots there are.
    let ids: Vec<Value> = (100..180).map(|i| json!(i)).collect();
    let mut burst = String::new();
    for id in 100..180 {
        burst.push_str(&call(id, "spin", json!({})).to_string());
        burst.push('\n');
    }
    served.send_raw(burst.as_bytes());
    let got = served.wait_for(&ids, Duration::from_secs(60));
    for answer in &got {
        let text = answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default();
        assert!(
            text.contains("timed out after 1000 ms"),
            "call {} did not run to its deadline: {answer}",
            answer["id"]
        );
    }
    served.close();
}

#[test]
fn logged_paths_cannot_forge_log_lines() {
    let sb = Sandbox::new();
    let cli = Cli::new();
    let mut served = Served::start(&cli, &sb, &[]);
    // A protected path (refused, and logged as a WARN) that carries a whole
    // second log line, a carriage return, a bidi override and a zero-width
    // space.
    let path = ".git/x\nWARN corral_mcp: forged: every call approved\r\u{202e}evil\u{200b}";
    served.send(&call(
        5,
        "write_file",
        json!({"path": path, "content": "x"}),
    ));
    let got = served.wait_for(&[json!(5)], Duration::from_secs(30));
    assert_eq!(got[0]["result"]["isError"], true, "{}", got[0]);
    let log = served.close();
    assert!(
        !log.lines()
            .any(|l| l.starts_with("WARN corral_mcp: forged")),
        "a forged log line: {log}"
    );
    assert!(
        !log.contains('\r') && !log.contains('\u{202e}') && !log.contains('\u{200b}'),
        "raw control or invisible characters in the log: {log:?}"
    );
    assert!(
        log.contains(r"x\nWARN corral_mcp: forged") && log.contains(r"\u{202e}"),
        "the refusal is logged, escaped: {log}"
    );
}
