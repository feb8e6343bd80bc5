//! `corral mcp serve` on whatever stdin and stdout its client gives it: two
//! pipes (Codex, Python), sockets (Node's child processes), one socket for
//! both, a pipe that stdout and stderr share (`2>&1`), files. Every one is
//! answered in full, and a pipe or socket the server read or wrote without
//! blocking is back in blocking mode when it exits, so a process that
//! shares it afterwards is not surprised.

use crate::*;
use serde_json::{Value, json};
use std::io::{Read as _, Write as _};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};
use std::time::Duration;

/// A handshake, then three reads of `notes.txt`, one line each.
fn requests() -> String {
    let mut lines = vec![
        json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
            "protocolVersion":"2025-06-18","capabilities":{},
            "clientInfo":{"name":"raw","version":"0"}}}),
        json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
    ];
    for id in 1..=3 {
        lines.push(json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
            "params":{"name":"read_file","arguments":{"path":"notes.txt"}}}));
    }
    lines.iter().map(|l| format!("{l}\n")).collect()
}

/// The workspace with `notes.txt`, and the server's command in it.
fn server() -> (Sandbox, Command) {
    let (sb, cli) = workspace_and_cli();
    sb.write("notes.txt", "the notes of the day\n");
    let cmd = cli.command(&sb.ws(), &["mcp", "serve", "--mode", "read-only"]);
    (sb, cmd)
}

/// Checks that `out` answers the handshake and the three reads, each a
/// line of its own (log lines, when stderr shares the pipe, between them).
fn answered(out: &str) {
    let answers: Vec<Value> = out
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    // The calls run at once, so their answers come in any order.
    let mut ids: Vec<i64> = answers.iter().filter_map(|a| a["id"].as_i64()).collect();
    ids.sort_unstable();
    assert_eq!(ids, [0, 1, 2, 3], "{out}");
    for a in answers.iter().filter(|a| a["id"] != 0) {
        let text = a["result"]["content"][0]["text"].as_str().unwrap_or("");
        assert!(text.contains("the notes of the day"), "{a}");
    }
}

/// Whether `fd`'s open file is in non-blocking mode.
fn nonblocking(fd: &impl AsRawFd) -> bool {
    // SAFETY: F_GETFL only reads the flags of an fd this test owns.
    let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
    assert!(flags >= 0, "F_GETFL failed");
    flags & libc::O_NONBLOCK != 0
}

/// Waits for the server to exit, killed if it does not within a minute.
fn exits(child: &mut std::process::Child) {
    for _ in 0..600 {
        if child.try_wait().unwrap().is_some() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    panic!("the server did not exit when its input ended");
}

/// Stdin and stdout are pipes the test keeps a copy of, and stderr is the
/// stdout pipe itself (`2>&1`): answered, each log line written whole so
/// that no answer lands inside one (failed before: a record and its
/// newline were two writes, and an answer between them lost its line), and
/// both pipes blocking again after it exits.
#[test]
fn pipes_are_answered_and_left_blocking_even_when_stderr_shares_stdout() {
    let (_sb, mut cmd) = server();
    let (stdin_r, mut stdin_w) = std::io::pipe().unwrap();
    let (mut stdout_r, stdout_w) = std::io::pipe().unwrap();
    let kept_in = stdin_r.try_clone().unwrap();
    let kept_out = stdout_w.try_clone().unwrap();
    let mut child = cmd
        .stdin(stdin_r)
        .stdout(stdout_w.try_clone().unwrap())
        .stderr(stdout_w)
        .env("CORRAL_LOG", "info")
        .spawn()
        .unwrap();
    drop(cmd);
    stdin_w.write_all(requests().as_bytes()).unwrap();
    drop(stdin_w);
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        stdout_r.read_to_string(&mut all).unwrap();
        all
    });
    exits(&mut child);
    assert!(!nonblocking(&kept_out), "stdout was left non-blocking");
    drop(kept_out);
    answered(&reader.join().unwrap());
    assert!(!nonblocking(&kept_in), "stdin was left non-blocking");
}

/// One socket for stdin and stdout, as a client that hands its child one
/// end of a socket pair does: answered, and blocking again after.
#[test]
fn one_socket_for_stdin_and_stdout_is_answered_and_left_blocking() {
    let (_sb, mut cmd) = server();
    let (mut ours, theirs) = UnixStream::pair().unwrap();
    let theirs = OwnedFd::from(theirs);
    let kept = theirs.try_clone().unwrap();
    let mut child = cmd
        .stdin(Stdio::from(theirs.try_clone().unwrap()))
        .stdout(Stdio::from(theirs))
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    drop(cmd);
    ours.write_all(requests().as_bytes()).unwrap();
    ours.shutdown(std::net::Shutdown::Write).unwrap();
    exits(&mut child);
    let mut all = String::new();
    ours.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    // The test's copy keeps the socket open: read what the server wrote
    // until the four answers are in.
    let mut buf = [0u8; 65536];
    loop {
        match ours.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => all.push_str(std::str::from_utf8(&buf[..n]).unwrap()),
            Err(_) => break,
        }
        if all.lines().filter(|l| l.starts_with('{')).count() >= 4 {
            break;
        }
    }
    answered(&all);
    assert!(!nonblocking(&kept), "the socket was left non-blocking");
}

/// Requests from a file and answers to a file (`corral mcp serve <
/// requests > answers`): read and written as files are.
#[test]
fn files_for_stdin_and_stdout_are_answered() {
    let (sb, mut cmd) = server();
    let dir = sb.root.path();
    std::fs::write(dir.join("requests.jsonl"), requests()).unwrap();
    let status = cmd
        .stdin(std::fs::File::open(dir.join("requests.jsonl")).unwrap())
        .stdout(std::fs::File::create(dir.join("answers.jsonl")).unwrap())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "{status}");
    answered(&std::fs::read_to_string(dir.join("answers.jsonl")).unwrap());
}
