//! `corral undo`: puts back the files the latest turn of a session changed.

use super::{fail, out};
use corral_core::checkpoint;
use corral_core::log::SessionLog;
use corral_core::session;
use corral_protocol::Event;
use std::path::Path;
use std::process::ExitCode;

/// Undoes the latest turn of session `id` (the workspace's last one by
/// default) not undone yet: shows the diff, asks unless `yes`, refuses
/// over later edits unless `force`, and records the undo in the log.
pub fn undo(workspace: &Path, id: Option<&str>, yes: bool, force: bool) -> ExitCode {
    let log = match session::sessions_dir(workspace).and_then(|d| session::find_session(&d, id)) {
        Ok(p) => p,
        Err(e) => return fail(&e),
    };
    let plan = match checkpoint::plan(&log, workspace) {
        Ok(p) => p,
        Err(e) => return fail(&e),
    };
    let names: Vec<String> = plan
        .files
        .iter()
        .map(|f| f.path.display().to_string())
        .collect();
    eprintln!(
        "undo turn {} of session {}: {}",
        plan.turn,
        session_id(&log),
        corral_protocol::terminal::inert(&names.join(", "))
    );
    out(&plan.diff());
    let conflicts = plan.conflicts();
    if !conflicts.is_empty() && !force {
        return fail(&format!(
            "{}\nNothing was restored. Look at the file, then run `corral undo --force` to \
             overwrite it with the checkpoint.",
            conflicts.join("\n")
        ));
    }
    if let Err(e) = approved(yes) {
        return fail(&e);
    }
    let restored = match plan.apply(force) {
        Ok(r) => r,
        Err(e) => return fail(&e),
    };
    let files: Vec<String> = restored.iter().map(|p| p.display().to_string()).collect();
    let logged = SessionLog::open(&log).and_then(|(mut l, _)| {
        l.append(
            &Event::Undone {
                turn: plan.turn,
                files: files.clone(),
            },
            true,
        )
        .map(|_| ())
    });
    if let Err(e) = logged {
        return fail(&format!(
            "the files were restored, but the undo cannot be written to the session log {}: {e}",
            log.display()
        ));
    }
    eprintln!(
        "restored {} file(s) to before turn {}; `corral undo` again goes one turn further back",
        files.len(),
        plan.turn
    );
    ExitCode::SUCCESS
}

fn session_id(log: &Path) -> String {
    log.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Asks on the terminal; without one, only `--yes` approves.
fn approved(yes: bool) -> Result<(), String> {
    if yes {
        return Ok(());
    }
    if !std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        return Err(
            "not approved, nothing was restored: answer on a terminal, or pass --yes".into(),
        );
    }
    eprint!("Restore these files? [y/N] ");
    let mut answer = String::new();
    if std::io::stdin().read_line(&mut answer).is_err() || !answer.trim().eq_ignore_ascii_case("y")
    {
        return Err("not approved, nothing was restored".into());
    }
    Ok(())
}
