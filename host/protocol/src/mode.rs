//! The permission mode: how much runs without asking when no rule matches.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// How much runs without asking when no rule matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Only calls whose effects are all `read` run; everything else is denied.
    ReadOnly,
    /// Reads run; writes, commands and network access ask.
    #[default]
    Ask,
    /// Reads and writes run; commands and network access ask.
    AutoEdit,
    /// Everything runs.
    FullAuto,
}

impl Mode {
    /// Every mode, from the most to the least cautious.
    pub const ALL: [Mode; 4] = [Mode::ReadOnly, Mode::Ask, Mode::AutoEdit, Mode::FullAuto];

    /// The name used in the manifest and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::ReadOnly => "read-only",
            Mode::Ask => "ask",
            Mode::AutoEdit => "auto-edit",
            Mode::FullAuto => "full-auto",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Mode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Mode::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Mode::ALL.iter().map(|m| m.as_str()).collect();
                format!(
                    "unknown permission mode `{s}`; use one of: {}",
                    names.join(", ")
                )
            })
    }
}
