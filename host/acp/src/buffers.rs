//! The editor's files as corral's `editor_read` and `editor_write` reach
//! them: `fs/read_text_file` and `fs/write_text_file` requests to the
//! client, made only when its `initialize` offered them. The core has
//! already judged the call and kept the path inside the workspace.

use crate::rpc::Peer;
use corral_core::editor::{EditorError, EditorFiles};
use futures::future::BoxFuture;
use serde_json::{Value, json};
use std::path::Path;
use std::sync::OnceLock;

/// The editor's file system, as its client capabilities offer it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Offered {
    /// `fs.readTextFile`.
    pub read: bool,
    /// `fs.writeTextFile`.
    pub write: bool,
}

impl Offered {
    /// What `initialize`'s `clientCapabilities` offer.
    pub fn of(capabilities: &Value) -> Self {
        Self {
            read: capabilities["fs"]["readTextFile"] == true,
            write: capabilities["fs"]["writeTextFile"] == true,
        }
    }
}

/// One session's way to the editor's files.
pub struct Buffers {
    peer: Peer,
    offered: Offered,
    /// The session's id, known once it is open.
    session: OnceLock<String>,
}

impl std::fmt::Debug for Buffers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Buffers")
            .field("offered", &self.offered)
            .finish_non_exhaustive()
    }
}

impl Buffers {
    /// The editor's files through `peer`, as `offered`.
    pub fn new(peer: Peer, offered: Offered) -> Self {
        Self {
            peer,
            offered,
            session: OnceLock::new(),
        }
    }

    /// Names the session the requests are about.
    pub fn opened(&self, session: &str) {
        let _ = self.session.set(session.to_owned());
    }

    fn session(&self) -> Result<&str, EditorError> {
        self.session
            .get()
            .map(String::as_str)
            .ok_or_else(|| EditorError("the session is not open yet".into()))
    }
}

impl EditorFiles for Buffers {
    fn can_read(&self) -> bool {
        self.offered.read
    }

    fn can_write(&self) -> bool {
        self.offered.write
    }

    fn read<'a>(
        &'a self,
        path: &'a Path,
        line: Option<u64>,
        limit: Option<u64>,
    ) -> BoxFuture<'a, Result<String, EditorError>> {
        Box::pin(async move {
            let mut params =
                json!({"sessionId": self.session()?, "path": path.display().to_string()});
            if let Some(line) = line {
                params["line"] = json!(line);
            }
            if let Some(limit) = limit {
                params["limit"] = json!(limit);
            }
            let answer = self
                .peer
                .request("fs/read_text_file", params)
                .await
                .map_err(|e| EditorError(e.message))?;
            answer["content"]
                .as_str()
                .map(str::to_owned)
                .ok_or_else(|| EditorError("the editor's answer holds no `content`".into()))
        })
    }

    fn write<'a>(
        &'a self,
        path: &'a Path,
        text: &'a str,
    ) -> BoxFuture<'a, Result<(), EditorError>> {
        Box::pin(async move {
            let params = json!({
                "sessionId": self.session()?,
                "path": path.display().to_string(),
                "content": text,
            });
            self.peer
                .request("fs/write_text_file", params)
                .await
                .map(|_| ())
                .map_err(|e| EditorError(e.message))
        })
    }
}
