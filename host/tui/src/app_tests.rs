//! The UI's key handling for custom commands, `!` lines and going back,
//! through [`App`] as the front-end drives it.

use super::app::{Action, App};
use super::custom::CustomCommand;
use super::rewind::{Rewind, one_line};
use super::transcript::Body;
use crate::protocol::{Event, Mode, Op};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

fn typed(app: &mut App, text: &str) {
    for c in text.chars() {
        app.key(key(KeyCode::Char(c)));
    }
}

fn enter(app: &mut App) {
    app.key(key(KeyCode::Enter));
}

fn prompt(app: &mut App, turn: u32, text: &str) {
    app.apply(&Event::TurnBegin { turn });
    app.apply(&Event::UserMessage { text: text.into() });
    app.apply(&Event::Stop {
        reason: crate::protocol::StopReason::FinalAnswer,
        message: None,
    });
}

#[test]
fn custom_commands_are_offered_and_asked_for() {
    let mut app = App::new("replay", Mode::Ask);
    app.set_commands(
        vec![CustomCommand {
            name: "/fix".into(),
            description: "Fix it\u{1b}[2J\nnow".into(),
            argument_hint: "[issue]".into(),
        }],
        vec!["/later".into()],
    );
    typed(&mut app, "/fi");
    assert_eq!(app.completion.len(), 1);
    assert_eq!(app.completion[0].0, "/fix");
    assert!(!app.completion[0].1.contains('\u{1b}'));
    assert!(!app.completion[0].1.contains('\n'));
    // A command with an argument hint takes the arguments next.
    enter(&mut app);
    assert_eq!(app.input.text, "/fix ");
    typed(&mut app, "12");
    enter(&mut app);
    assert_eq!(app.drain_actions(), [Action::Command("/fix 12".into())]);
    typed(&mut app, "/later");
    enter(&mut app);
    assert_eq!(app.drain_actions(), [Action::Command("/later".into())]);
    typed(&mut app, "/nope");
    enter(&mut app);
    assert!(app.drain_actions().is_empty());
    assert!(super::app::help(&app.custom).contains("/fix"));
}

#[test]
fn a_bang_line_runs_through_the_session_and_not_during_a_turn() {
    let mut app = App::new("replay", Mode::Ask);
    typed(&mut app, "!git status");
    enter(&mut app);
    assert_eq!(
        app.drain_actions(),
        [Action::Submit(Op::Shell {
            command: "git status".into()
        })]
    );
    // Busy until its stop.
    typed(&mut app, "!ls");
    enter(&mut app);
    assert!(app.drain_actions().is_empty());
    app.apply(&Event::Stop {
        reason: crate::protocol::StopReason::FinalAnswer,
        message: None,
    });
    typed(&mut app, "!");
    enter(&mut app);
    assert!(app.drain_actions().is_empty());
}

#[test]
fn esc_esc_picks_a_prompt_and_a_rewind_cuts_the_transcript() {
    let mut app = App::new("replay", Mode::Ask);
    prompt(&mut app, 1, "first\u{1b}[31m message\nsecond line");
    prompt(&mut app, 2, "later");
    app.set_clock(1000);
    app.key(key(KeyCode::Esc));
    assert!(!app.rewind_open(), "one Esc does not open it");
    app.set_clock(1300);
    app.key(key(KeyCode::Esc));
    let Some(Rewind::Prompts { items, .. }) = &app.rewind else {
        panic!("Esc Esc opens the picker: {:?}", app.rewind);
    };
    assert_eq!(items[0].1, "later", "newest first");
    let shown = one_line(&items[1].1);
    assert!(
        shown.starts_with("first") && shown.ends_with(" …") && !shown.contains('\u{1b}'),
        "one inert line: {shown}"
    );
    app.key(key(KeyCode::Down));
    app.key(key(KeyCode::Enter));
    app.key(key(KeyCode::Enter));
    assert_eq!(
        app.drain_actions(),
        vec![Action::PreviewRewind {
            turn: 1,
            conversation: true,
            force: false
        }]
    );
    app.apply(&Event::Rewound {
        turn: 1,
        conversation: true,
        files: vec!["a.txt".into()],
    });
    assert!(app.transcript.prompts.is_empty());
    assert!(
        !app.transcript
            .entries
            .iter()
            .any(|e| matches!(&e.body, Body::User(_))),
        "the rewound prompts leave the transcript"
    );
    assert!(app.input.text.starts_with("first"), "{}", app.input.text);
}

#[test]
fn a_confirmed_undo_submits_and_a_cancelled_one_does_not() {
    let mut app = App::new("replay", Mode::Ask);
    app.confirm("undo", "-a\n+b\n", Op::Undo { force: false });
    app.key(key(KeyCode::Char('n')));
    assert!(!app.rewind_open());
    assert!(app.drain_actions().is_empty());
    app.confirm("undo", "-a\n+b\n", Op::Undo { force: false });
    app.key(key(KeyCode::Char('y')));
    assert_eq!(
        app.drain_actions(),
        vec![Action::Submit(Op::Undo { force: false })]
    );
}
