//! The UI habits people bring from other agents, in a real terminal (tmux):
//! every slash command in the popup, a denied card that says why, `/diff`
//! with untracked files, `/plugins` with grants.

use crate::support::cassette::{self, streamed_turn};
use crate::support::tui::trusted_pane;
use crate::*;
use serde_json::json;

#[test]
fn popup_denied_card_diff_and_plugins() {
    let sb = Sandbox::new();
    let git = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(sb.ws())
        .status();
    if !git.is_ok_and(|s| s.success()) {
        crate::support::skip::missing("git is not installed", "apt-get install git");
        return;
    }
    let write = json!({
        "id": "w1",
        "name": "write_file",
        "arguments": json!({"path": "notes.txt", "content": "new text\n"}).to_string(),
    });
    let turns = json!([
        streamed_turn("Writing notes.txt.", vec![write], 50),
        streamed_turn("It was refused.", vec![], 50),
    ]);
    cassette::write(&sb, "c.json", &turns);
    sb.write(
        "corral.toml",
        &crate::support::tui::replay_manifest(r#"mode = "read-only""#, ""),
    );
    let cli = Cli::new();
    let Some(pane) = trusted_pane(&cli, &sb) else {
        return;
    };

    // Every slash command fits in the popup, the last one too.
    pane.type_text("/");
    for (command, _) in corral_tui::SLASH_COMMANDS {
        pane.wait_for(command);
    }
    pane.press("BSpace");

    // The policy denies the write in read-only mode: the card says so.
    pane.submit("write it");
    let screen = pane.wait_for("It was refused.");
    let card = screen
        .lines()
        .skip_while(|l| !l.contains("write_file"))
        .take(3)
        .collect::<Vec<_>>()
        .join("\n");
    assert!(card.contains("denied"), "{screen}");
    assert!(card.contains("⎿"), "{screen}");
    assert!(card.contains("read-only"), "{screen}");
    assert!(!card.contains("+new text"), "{screen}");
    assert!(!sb.ws().join("notes.txt").exists());

    // An untracked file is in `/diff`.
    pane.submit("/diff");
    pane.wait_for("+hello from the workspace");

    pane.submit("/plugins");
    pane.wait_for("grants: fs . (ro)");
}
