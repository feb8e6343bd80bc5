//! Helpers shared by the test modules, one file per concern, so that a test
//! says what it scripts and checks instead of how a cassette, a log or a
//! child process is handled. A helper lives here once two modules need it.

pub mod cassette;
pub mod files;
pub mod log;
pub mod manifest;
pub mod model;
pub mod output;
pub mod process;
pub mod pty;
pub mod run;
pub mod schema;
pub mod servers;
pub mod skip;
