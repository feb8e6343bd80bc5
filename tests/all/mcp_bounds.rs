//! `corral mcp serve` stays within its bounds, spoken to in raw JSON-RPC
//! over pipes: calls beyond the runtime's instance slots wait instead of
//! failing, a request line over the transport's cap is answered with a
//! JSON-RPC error (and the server goes on), and what the server logs cannot
//! forge log lines.

use crate::support::served::Served;
use crate::support::text::has;
use crate::*;
use corral_test_programs::ADVERSARY;
use serde_json::{Value, json};
use std::time::Duration;

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
    has(&log, "over the 16 MiB limit");
}

#[test]
fn calls_beyond_the_instance_slots_wait_for_a_place() {
    let sb = Sandbox::with_manifest(&format!(
        "[plugins.adversary]\nsource = {ADVERSARY:?}\n\
             limits = {{ timeout_ms = 1000, memory_mb = 16 }}\n"
    ));
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
    let (sb, cli) = workspace_and_cli();
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
