//! `corral undo`: puts back the files the latest turn of a session changed;
//! and what `/undo` and a rewind in the UI show before they restore files.

use super::{fail, out};
use corral_core::checkpoint;
use corral_core::log::SessionLog;
use corral_core::session;
use corral_protocol::{Event, Op};
use std::path::Path;
use std::process::ExitCode;

/// Undoes the latest turn of session `id` (the workspace's last one by
/// default) not undone yet: shows the diff, asks unless `yes`, refuses
/// over later edits unless `force`, and records the undo in the log.
pub fn undo(workspace: &Path, id: Option<&str>, yes: bool, force: bool) -> ExitCode {
    let log = match session::sessions_dir(workspace).and_then(|d| session::find_session(&d, id)) {
        Ok(p) => p,
        Err(e) => return fail(&e.to_string()),
    };
    let plan = match checkpoint::plan(&log, workspace) {
        Ok(p) => p,
        Err(e) => return fail(&e.to_string()),
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
        Err(e) => return fail(&e.to_string()),
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

/// The names of a plan's files, made inert.
fn names(plan: &checkpoint::Plan) -> String {
    let names: Vec<String> = plan
        .files
        .iter()
        .map(|f| f.path.display().to_string())
        .collect();
    corral_protocol::terminal::inert(&names.join(", ")).into_owned()
}

/// `/undo` in the UI: the diff of what it would restore, to confirm; or
/// why not (nothing to undo, files edited since without `--force`).
pub(super) fn preview_undo(app: &mut corral_tui::App, log: &Path, workspace: &Path, force: bool) {
    let plan = match checkpoint::plan(log, workspace) {
        Ok(p) => p,
        Err(e) => return app.notice(&e.to_string(), true),
    };
    let conflicts = plan.conflicts();
    if !conflicts.is_empty() && !force {
        return app.notice(
            &format!(
                "{}\nNothing was restored. Look at the file, then `/undo --force` (or `corral \
                 undo --force`) overwrites it with the checkpoint.",
                conflicts.join("\n")
            ),
            true,
        );
    }
    let title = format!("undo turn {}: restore {}", plan.turn, names(&plan));
    app.confirm(&title, &plan.diff(), Op::Undo { force });
}

/// A rewind to before the prompt of `turn` that restores code: the diff
/// of every turn from it on, to confirm; or why not.
pub(super) fn preview_rewind(
    app: &mut corral_tui::App,
    log: &Path,
    workspace: &Path,
    (turn, conversation, force): (u32, bool, bool),
) {
    let op = Op::Rewind {
        turn,
        conversation,
        code: true,
        force,
    };
    let plan = match checkpoint::plan_from(log, workspace, turn) {
        Ok(Some(p)) => p,
        Ok(None) if conversation => {
            return app.confirm(
                "rewind the conversation; no turn from that message on changed a file",
                "",
                op,
            );
        }
        Ok(None) => {
            return app.notice(
                "nothing to restore: no turn from that message on changed a file (that is \
                 not undone yet)",
                false,
            );
        }
        Err(e) => return app.notice(&e.to_string(), true),
    };
    let conflicts = plan.conflicts();
    if !conflicts.is_empty() && !force {
        return app.notice(
            &format!(
                "{}\nNothing was restored and the conversation is unchanged. Look at the file, \
                 then `/rewind --force` overwrites it with the checkpoint (or pick \
                 \"restore conversation only\").",
                conflicts.join("\n")
            ),
            true,
        );
    }
    let turns = if plan.turns.len() == 1 {
        format!("turn {}", plan.turn)
    } else {
        format!("turns {}–{}", plan.turns[0], plan.turn)
    };
    let what = if conversation {
        "rewind the conversation and restore"
    } else {
        "restore"
    };
    let title = format!("{what} the files of {turns}: {}", names(&plan));
    app.confirm(&title, &plan.diff(), op);
}
