//! Helpers shared by the test modules, one file per concern, so that a test
//! says what it scripts and checks instead of how a cassette, a log or a
//! child process is handled. A helper lives here once two modules need it.

pub mod agents;
pub mod approvals;
pub mod cassette;
pub mod events;
pub mod files;
pub mod git;
pub mod guard;
pub mod http;
pub mod imports;
pub mod log;
pub mod manifest;
pub mod mcp_clients;
pub mod mock;
pub mod model;
pub mod output;
pub mod process;
pub mod pty;
pub mod registry;
pub mod run;
pub mod schema;
pub mod served;
pub mod servers;
pub mod skip;
pub mod text;
pub mod tui;
