//! Sessions: the handle every front-end drives a session through
//! ([`open`] → [`Session`]), and finding a session's log and provider. The
//! log itself is [`crate::log`]; what front-ends read of it is
//! re-exported here.

mod diff;
mod handle;
mod open;

pub use crate::log::{Record, Summary, civil, list, new_id, read, sessions_root, workspace_dir};
pub use diff::DiffError;
pub use handle::{
    Approvals, Finished, Resume, Session, SessionConfig, SessionError, SessionTool, open,
};
pub use open::{FindError, ProviderError, choose_provider, find_session, sessions_dir};
