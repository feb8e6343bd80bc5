//! Installing plugins: fetching a component (file, `https://`, OCI),
//! reading what it requests and what it exports, and turning what the user
//! approves into a manifest entry pinned by SHA-256.
//!
//! Nothing here grants anything by itself. A component's requests
//! ([`requests`]) are shown next to its tools and imports; the user
//! narrows or approves them ([`review`]); only the approved grants are
//! written to the manifest ([`edit`]), which is all the runtime reads. The
//! component is kept by content hash ([`store`]), so the pin in the
//! manifest and the file's name agree.

pub mod edit;
pub mod fetch;
pub mod oci;
pub mod requests;
pub mod review;
pub mod store;

use crate::runtime::{Inspection, Runtime};
use fetch::{Fetched, PluginSource};
use requests::Requests;

/// Why a fetched component is refused before the user sees it; its text
/// names the source.
#[derive(Debug, thiserror::Error)]
pub enum CandidateError {
    /// It could not be fetched.
    #[error(transparent)]
    Fetch(#[from] fetch::FetchError),
    /// Its embedded requests cannot be read.
    #[error("{record}: {why}; refusing it")]
    Requests {
        /// The source, as the manifest records it.
        record: String,
        /// Why.
        why: requests::EmbeddedError,
    },
    /// corral cannot load it.
    #[error("{record}: {why}")]
    Inspect {
        /// The source, as the manifest records it.
        record: String,
        /// The loader's reason.
        why: crate::runtime::LoadError,
    },
    /// Its tools cannot be read.
    #[error("{record}: its tools cannot be read ({why}); it would not work as a tool plugin")]
    Tools {
        /// The source, as the manifest records it.
        record: String,
        /// Why.
        why: String,
    },
}

impl From<CandidateError> for String {
    fn from(e: CandidateError) -> Self {
        e.to_string()
    }
}

/// A component fetched and read, waiting for the user's approval.
#[derive(Debug)]
pub struct Candidate {
    /// Where it came from.
    pub source: PluginSource,
    /// Its bytes and hash.
    pub fetched: Fetched,
    /// What it requests (empty when it carries no requests).
    pub requests: Requests,
    /// Whether it carried a requests section at all.
    pub has_requests: bool,
    /// Its imports and tools, read with no grants.
    pub inspection: Inspection,
    /// The version it declares (its requests, else the OCI annotation).
    pub version: Option<String>,
}

impl Candidate {
    /// Fetches `source` and reads it: its requests, its imports and its
    /// tools (described with nothing granted). A component that corral
    /// could not load, or whose tools cannot be read, is refused here.
    pub async fn fetch(
        rt: &Runtime,
        source: PluginSource,
        expected_sha256: Option<&str>,
    ) -> Result<Self, CandidateError> {
        let fetched = fetch::fetch(&source, expected_sha256).await?;
        let embedded =
            requests::embedded(&fetched.bytes).map_err(|why| CandidateError::Requests {
                record: source.record(),
                why,
            })?;
        let has_requests = embedded.is_some();
        let requests = embedded.unwrap_or_default();
        let inspection =
            rt.inspect(&fetched.bytes)
                .await
                .map_err(|why| CandidateError::Inspect {
                    record: source.record(),
                    why,
                })?;
        if let Err(e) = &inspection.tools {
            return Err(CandidateError::Tools {
                record: source.record(),
                why: e.to_string(),
            });
        }
        let version = requests
            .plugin
            .version
            .clone()
            .or_else(|| fetched.annotations.get(oci::VERSION_ANNOTATION).cloned());
        Ok(Self {
            source,
            fetched,
            requests,
            has_requests,
            inspection,
            version,
        })
    }

    /// Puts `prefix` before each tool name, as an entry's `tool_prefix` does.
    pub fn prefix_tools(&mut self, prefix: &str) {
        if let Ok(tools) = &mut self.inspection.tools {
            for t in tools {
                t.name = format!("{prefix}{}", t.name);
            }
        }
    }

    /// Its tools (empty if they could not be read).
    pub fn tools(&self) -> &[crate::protocol::ToolSpec] {
        self.inspection.tools.as_deref().unwrap_or(&[])
    }

    /// The name its entry gets unless the user picks one: the declared
    /// name, else the file or repository name made into a valid one.
    pub fn default_name(&self) -> Option<String> {
        if let Some(n) = &self.requests.plugin.name {
            return Some(n.clone());
        }
        let record = self.source.record();
        let last = record
            .rsplit('/')
            .next()
            .unwrap_or("")
            .split(['@', ':'])
            .next()
            .unwrap_or("")
            .trim_end_matches(".wasm")
            .to_ascii_lowercase()
            .replace(
                |c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'),
                "-",
            );
        crate::manifest::valid_plugin_name(&last).then_some(last)
    }
}
