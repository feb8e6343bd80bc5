//! State that became typed keeps the formats already written: a session log
//! from before the compaction trigger was an enum, with each of the three
//! names it held, still resumes through the real `corral` binary, shows its
//! trigger, and gives the model the summary it logged.

use crate::support::log::session_log;
use crate::support::manifest::{KEYS, OPENAI_KEY, both_providers};
use crate::support::mock::*;
use crate::support::output::assert_exit;
use crate::support::text::{has, lacks};
use crate::*;
use serde_json::{Value, json};

/// A record as older corral wrote it when it compacted: the trigger is the
/// bare name.
fn old_compacted(seq: u64, trigger: &str, summary: &str) -> String {
    json!({
        "seq": seq,
        "ts_ms": 1_700_000_000_000u64,
        "event": {
            "type": "compacted",
            "summary": summary,
            "replaced": 2,
            "kept": 0,
            "trigger": trigger,
            "tokens_before": 900,
            "tokens_after": 40,
        }
    })
    .to_string()
}

#[test]
fn an_old_log_with_each_compaction_trigger_still_resumes() {
    for trigger in ["auto", "manual", "context_length"] {
        let server = MockServer::start(|i, _| Reply::Sse(openai_sse(&format!("answer {i}."), &[])));
        let sb = Sandbox::with_manifest(&both_providers(server.port, server.port, ""));
        let cli = Cli::new();
        let o = cli.run_env(&sb.ws(), &["run", "--provider", "openai", "hello"], &KEYS);
        assert_exit(&o, 0);

        // The compaction an older corral logged after the first turn.
        let log = session_log(&cli);
        let text = std::fs::read_to_string(&log).expect("log");
        let last: Value =
            serde_json::from_str(text.lines().last().expect("a record")).expect("json");
        let seq = last["seq"].as_u64().expect("seq") + 1;
        let summary = format!("Task: greet ({trigger}).");
        let line = old_compacted(seq, trigger, &summary);
        std::fs::write(&log, format!("{text}{line}\n")).expect("write log");

        let id = log.file_stem().expect("id").to_str().expect("utf-8");
        let o = cli.run_env(
            &sb.ws(),
            &["resume", id, "--provider", "openai", "-p", "and now?"],
            &KEYS,
        );
        let (out, err) = (
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        );
        assert_eq!(o.status.code(), Some(0), "{trigger}: {out}\n{err}");
        assert!(out.contains("answer "), "{trigger}: {out}");

        // The resumed request is the logged projection: the summary in place
        // of the first turn, then the new prompt.
        let reqs = server.requests();
        let resumed = reqs
            .iter()
            .rfind(|r| r.path.ends_with("/chat/completions"))
            .expect("a request after resume");
        check_openai_request(resumed, OPENAI_KEY);
        let messages = resumed.body["messages"].as_array().expect("messages");
        let summary_text = messages[1]["content"].as_str().unwrap_or("");
        assert!(
            summary_text.starts_with(corral_sdk::cassette::SUMMARY_MESSAGE_MARK)
                && summary_text.contains(&summary),
            "{trigger}: {}",
            resumed.body
        );
        assert_eq!(messages.len(), 3, "{trigger}: {}", resumed.body);
        assert_eq!(messages[2]["content"], "and now?");

        // The old line is kept as it was and reads back to the same text.
        let after = std::fs::read_to_string(&log).expect("log");
        assert!(after.contains(&format!("{line}\n")), "{trigger}");
        let records = corral_core::session::read(&log).expect("the log reads");
        let record = records
            .iter()
            .find(|r| r.seq == seq)
            .expect("the old record");
        assert_eq!(
            serde_json::to_value(&record.event).expect("event"),
            serde_json::from_str::<Value>(&line).expect("line")["event"],
            "{trigger}"
        );

        let o = cli.run(&sb.ws(), &["show", id]);
        let shown = String::from_utf8_lossy(&o.stdout).into_owned();
        assert!(
            shown.contains(&format!("-- compacted ({trigger}): 2 messages replaced")),
            "{trigger}: {shown}"
        );
    }
}

/// The UI's mode is the session's: the manifest's at start, then what
/// `/mode` chose, in the status line.
#[test]
fn the_status_line_shows_the_mode_and_follows_mode_changes() {
    let sb = Sandbox::with_manifest(
        "[agent]\nprovider = \"replay\"\n\n[policy]\nmode = \"read-only\"\n\n\
         [plugins.replay]\nsource = \"builtin:replay\"\n",
    );
    let cli = Cli::new();
    let Some(pane) = crate::support::tui::trusted_pane(&cli, &sb) else {
        return;
    };
    pane.wait_for(" · read-only · ");
    pane.submit("/mode auto-edit");
    let screen = pane.wait_for(" · auto-edit · ");
    has(&screen, "mode: auto-edit");
    lacks(&screen, " · read-only · ");
}
