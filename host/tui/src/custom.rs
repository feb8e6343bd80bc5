//! Custom slash commands as the UI lists them (the front-end finds and
//! expands them), `!` lines, and the session's cost.

use super::app::{Action, App, Working};
use super::text::clean;
use crate::protocol::Op;

/// A custom command offered: its name, description and argument hint, all
/// made inert (a project's file is text from outside).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomCommand {
    /// `/frontend:test`.
    pub name: String,
    /// What it does, from its front-matter.
    pub description: String,
    /// What arguments it takes (`[issue]`), from its front-matter.
    pub argument_hint: String,
}

/// The custom commands the UI knows of.
#[derive(Debug, Default)]
pub(crate) struct Custom {
    offered: Vec<CustomCommand>,
    /// Names of commands not offered: typing one asks the front-end, which
    /// says why.
    refused: Vec<String>,
}

impl Custom {
    /// Whether `/name` is a custom command, offered or refused.
    pub(crate) fn knows(&self, name: &str) -> bool {
        self.offered.iter().any(|c| c.name == name) || self.refused.iter().any(|n| n == name)
    }

    /// The offered commands starting with `prefix`, for the popup.
    pub(crate) fn completions<'a>(
        &'a self,
        prefix: &'a str,
    ) -> impl Iterator<Item = (String, String)> + 'a {
        self.offered
            .iter()
            .filter(move |c| c.name.starts_with(prefix))
            .map(|c| (c.name.clone(), described(c)))
    }

    /// Whether the command `name` takes arguments (it has a hint).
    pub(crate) fn takes_arguments(&self, name: &str) -> bool {
        self.offered
            .iter()
            .any(|c| c.name == name && !c.argument_hint.is_empty())
    }

    /// The custom commands' part of `/help`.
    pub(crate) fn help(&self) -> String {
        let mut text = String::new();
        if !self.offered.is_empty() {
            text.push_str("custom commands (.corral/commands, your commands directory):\n");
        }
        for c in &self.offered {
            text.push_str(&format!("{:<10} {}\n", c.name, described(c)));
        }
        for n in &self.refused {
            text.push_str(&format!("{n:<10} (not offered: type it to see why)\n"));
        }
        text
    }
}

fn described(c: &CustomCommand) -> String {
    let what = if c.description.is_empty() {
        "custom command"
    } else {
        c.description.as_str()
    };
    if c.argument_hint.is_empty() {
        what.to_owned()
    } else {
        format!("{what} {}", c.argument_hint)
    }
}

impl App {
    /// Tells the UI about the custom commands: those `offered` (listed in
    /// the popup and `/help`) and the names of those `refused`.
    pub fn set_commands(&mut self, offered: Vec<CustomCommand>, refused: Vec<String>) {
        let one_line = |s: &str| clean(s).replace(['\n', '\r'], " ");
        self.custom = Custom {
            offered: offered
                .into_iter()
                .map(|c| CustomCommand {
                    name: one_line(&c.name),
                    description: one_line(&c.description),
                    argument_hint: one_line(&c.argument_hint),
                })
                .collect(),
            refused: refused.iter().map(|n| one_line(n)).collect(),
        };
    }

    /// Sets the session's cost so far (US dollars), shown in the status
    /// line; `None` when the model's price is not known.
    pub fn set_cost(&mut self, cost: Option<f64>) {
        self.cost = cost;
    }

    /// A `!` line: the command runs through the session's call pipeline.
    pub(crate) fn shell(&mut self, command: &str) {
        if command.is_empty() {
            self.notice(
                "`!` runs a command line: type it after the `!`, e.g. `!git status`",
                true,
            );
            return;
        }
        if self.turn_running {
            self.notice(
                "a turn is running; run `!` commands once it ends (Esc interrupts it)",
                true,
            );
            return;
        }
        self.scroll = 0;
        self.turn_running = true;
        self.working = Working::Tools;
        self.actions.push(Action::Submit(Op::Shell {
            command: command.to_owned(),
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{Event, Mode};
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

    fn typed(app: &mut App, text: &str) {
        for c in text.chars() {
            app.key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE));
        }
    }

    fn enter(app: &mut App) {
        app.key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
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
        assert!(super::super::app::help(&app.custom).contains("/fix"));
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
}
