//! # corral-tui
//!
//! A front-end: depends on the protocol only (exports [`App`], [`Action`],
//! [`render`]).
//!
//! The interactive terminal UI, as state and rendering only: an [`App`] is
//! fed the session's [`Event`](crate::protocol::Event)s with [`App::apply`]
//! and the user's keys with [`App::key`], and answers with [`Action`]s
//! (mostly [`Op`](crate::protocol::Op)s to submit). [`render`] draws it into
//! any ratatui frame, so everything here is testable without a terminal; the
//! `corral` binary owns the terminal and the session.
//!
//! ```
//! use corral_protocol::{Event, Mode};
//! use corral_tui::App;
//! use ratatui::{Terminal, backend::TestBackend};
//!
//! let mut app = App::new("replay", Mode::Ask);
//! app.apply(&Event::UserMessage { text: "hello".into() });
//! let mut term = Terminal::new(TestBackend::new(40, 10)).unwrap();
//! term.draw(|f| corral_tui::render(f, &mut app)).unwrap();
//! ```
#![deny(clippy::print_stdout, clippy::print_stderr)]
#![warn(missing_docs)]

use corral_protocol as protocol;
use corral_protocol::terminal;

mod app;
mod cards;
mod custom;
mod input;
mod markdown;
mod modal;
mod rewind;
mod status;
mod text;
mod transcript;
mod view;

pub use app::{Action, App, SLASH_COMMANDS};
pub use cards::plan_mark;
pub use custom::CustomCommand;
pub use markdown::markdown;
pub use modal::Picked;
pub use view::render;

#[cfg(test)]
mod app_tests;
#[cfg(test)]
mod snapshot_tests;
