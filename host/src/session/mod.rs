//! Sessions: the append-only log ([`SessionLog`]) and the handle every
//! front-end drives a session through ([`open`] → [`Session`]).

mod handle;
mod log;
mod open;

pub use handle::{Approvals, Finished, Resume, Session, SessionConfig, open};
pub use log::{
    Record, SessionLog, Summary, civil, list, new_id, read, sessions_root, workspace_dir,
};
pub use open::{choose_provider, find_session, sessions_dir};
