//! Where a plugin comes from, and getting its bytes: a local file, an
//! `https://` URL pinned with `--sha256`, or an OCI reference.

use super::oci::{self, is_loopback};
use crate::trust::{read_plugin_file, sha256_hex};
use std::path::{Path, PathBuf};

/// Why what the user typed names no place to get a component from.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// An `oci://` reference that does not parse.
    #[error(transparent)]
    Oci(#[from] oci::OciError),
    /// Plain `http://` to a host that is not this machine.
    #[error("{0}: plain http is only used for loopback addresses; use https://")]
    PlainHttp(String),
    /// A scheme corral does not fetch from.
    #[error("{0}: unknown scheme; a plugin comes from a file, https:// or oci://")]
    UnknownScheme(String),
}

impl From<SourceError> for String {
    fn from(e: SourceError) -> Self {
        e.to_string()
    }
}

/// Why a component could not be fetched; its text names the source.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The file cannot be read.
    #[error("cannot read {}: {why}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The reason, in words.
        why: String,
    },
    /// A URL without `--sha256`.
    #[error("{0}: a download must be pinned; pass --sha256 with the hash its publisher gives")]
    Unpinned(String),
    /// No HTTP client could be made.
    #[error("cannot start an HTTP client: {0}")]
    Client(String),
    /// The download failed.
    #[error("{url}: {why}")]
    Http {
        /// The URL.
        url: String,
        /// The reason, in words.
        why: String,
    },
    /// The server answered with an error status.
    #[error("{url}: the server answered {status}")]
    Status {
        /// The URL.
        url: String,
        /// The status.
        status: reqwest::StatusCode,
    },
    /// The download is larger than corral loads.
    #[error("{url}: larger than {mb} MB; refusing it")]
    TooLarge {
        /// The URL.
        url: String,
        /// The limit, in MB.
        mb: u64,
    },
    /// The OCI pull failed.
    #[error(transparent)]
    Oci(#[from] oci::OciError),
    /// The bytes are not the ones pinned.
    #[error("{record} has sha256 {got}, not the {want} you pinned; refusing it")]
    Mismatch {
        /// The source, as the manifest records it.
        record: String,
        /// Their SHA-256.
        got: String,
        /// The pinned one.
        want: String,
    },
}

impl From<FetchError> for String {
    fn from(e: FetchError) -> Self {
        e.to_string()
    }
}

/// A place to get a component from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PluginSource {
    /// A `.wasm` file on this machine.
    File(PathBuf),
    /// An `https://` URL (`http://` only to a loopback address).
    Url(String),
    /// `oci://host[:port]/repository:tag` or `…@sha256:…`.
    Oci(oci::OciRef),
}

impl PluginSource {
    /// Parses what the user typed. Relative file paths are taken from `cwd`.
    pub fn parse(text: &str, cwd: &Path) -> Result<Self, SourceError> {
        if let Some(rest) = text.strip_prefix("oci://") {
            return Ok(PluginSource::Oci(oci::OciRef::parse(rest)?));
        }
        if text.starts_with("https://") {
            return Ok(PluginSource::Url(text.to_owned()));
        }
        if text.starts_with("http://") {
            let host = url_host(text);
            if is_loopback(&host) {
                return Ok(PluginSource::Url(text.to_owned()));
            }
            return Err(SourceError::PlainHttp(text.to_owned()));
        }
        if text.contains("://") {
            return Err(SourceError::UnknownScheme(text.to_owned()));
        }
        let path = Path::new(text);
        Ok(PluginSource::File(if path.is_absolute() {
            path.to_path_buf()
        } else {
            cwd.join(path)
        }))
    }

    /// How the manifest records it (`from = …`).
    pub fn record(&self) -> String {
        match self {
            PluginSource::File(p) => p.display().to_string(),
            PluginSource::Url(u) => u.clone(),
            PluginSource::Oci(r) => format!("oci://{r}"),
        }
    }
}

/// A fetched component.
#[derive(Debug)]
pub struct Fetched {
    /// Its bytes.
    pub bytes: Vec<u8>,
    /// Their SHA-256, lowercase hex.
    pub sha256: String,
    /// For OCI: the manifest digest it was pulled by.
    pub digest: Option<String>,
    /// For OCI: the manifest's annotations.
    pub annotations: std::collections::BTreeMap<String, String>,
}

/// Gets the bytes of `source`. A URL needs `expected_sha256`; when given,
/// any source must match it.
pub async fn fetch(
    source: &PluginSource,
    expected_sha256: Option<&str>,
) -> Result<Fetched, FetchError> {
    let (bytes, digest, annotations) = match source {
        PluginSource::File(path) => (
            read_plugin_file(path).map_err(|e| FetchError::Read {
                path: path.clone(),
                why: e.to_string(),
            })?,
            None,
            Default::default(),
        ),
        PluginSource::Url(url) => {
            if expected_sha256.is_none() {
                return Err(FetchError::Unpinned(url.clone()));
            }
            (download(url).await?, None, Default::default())
        }
        PluginSource::Oci(r) => {
            let pulled = oci::pull(r).await?;
            (pulled.bytes, Some(pulled.digest), pulled.annotations)
        }
    };
    let sha256 = sha256_hex(&bytes);
    if let Some(want) = expected_sha256
        && !want.eq_ignore_ascii_case(&sha256)
    {
        return Err(FetchError::Mismatch {
            record: source.record(),
            got: sha256,
            want: want.to_owned(),
        });
    }
    Ok(Fetched {
        bytes,
        sha256,
        digest,
        annotations,
    })
}

async fn download(url: &str) -> Result<Vec<u8>, FetchError> {
    let client = reqwest::Client::builder()
        .user_agent(concat!("corral/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| FetchError::Client(e.to_string()))?;
    let mut response = client.get(url).send().await.map_err(|e| FetchError::Http {
        url: url.to_owned(),
        why: crate::words::http(&e),
    })?;
    if !response.status().is_success() {
        return Err(FetchError::Status {
            url: url.to_owned(),
            status: response.status(),
        });
    }
    let max = crate::trust::MAX_PLUGIN_FILE;
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| FetchError::Http {
        url: url.to_owned(),
        why: crate::words::http(&e),
    })? {
        bytes.extend_from_slice(&chunk);
        if bytes.len() as u64 > max {
            return Err(FetchError::TooLarge {
                url: url.to_owned(),
                mb: max >> 20,
            });
        }
    }
    Ok(bytes)
}

/// The host of an `http(s)://host[:port]/…` URL, without brackets.
fn url_host(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let authority = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if let Some(v6) = authority.strip_prefix('[') {
        return v6.split(']').next().unwrap_or("").to_owned();
    }
    authority.split(':').next().unwrap_or("").to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_parse_and_plain_http_is_for_loopback_only() {
        let cwd = Path::new("/w");
        assert_eq!(
            PluginSource::parse("x.wasm", cwd).unwrap(),
            PluginSource::File(PathBuf::from("/w/x.wasm"))
        );
        assert!(PluginSource::parse("http://127.0.0.1:8/x.wasm", cwd).is_ok());
        assert!(PluginSource::parse("http://[::1]:8/x.wasm", cwd).is_ok());
        assert!(PluginSource::parse("http://example.com/x.wasm", cwd).is_err());
        assert!(PluginSource::parse("http://127.0.0.1.example.com/x", cwd).is_err());
        assert!(PluginSource::parse("ftp://x/y", cwd).is_err());
    }
}
