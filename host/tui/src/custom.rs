//! Custom slash commands as the UI lists them (the front-end finds and
//! expands them): offered in the completion popup and `/help`, or refused.

use super::text::clean;

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
    /// The commands `offered` (listed in the popup and `/help`) and the
    /// names of those `refused`, made inert and one line each.
    pub(crate) fn new(offered: Vec<CustomCommand>, refused: Vec<String>) -> Self {
        let one_line = |s: &str| clean(s).replace(['\n', '\r'], " ");
        Self {
            offered: offered
                .into_iter()
                .map(|c| CustomCommand {
                    name: one_line(&c.name),
                    description: one_line(&c.description),
                    argument_hint: one_line(&c.argument_hint),
                })
                .collect(),
            refused: refused.iter().map(|n| one_line(n)).collect(),
        }
    }

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
