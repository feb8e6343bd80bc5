//! Where a plugin comes from, and getting its bytes: a local file, an
//! `https://` URL pinned with `--sha256`, or an OCI reference.

use super::oci::{self, is_loopback};
use crate::trust::{read_plugin_file, sha256_hex};
use std::path::{Path, PathBuf};

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
    pub fn parse(text: &str, cwd: &Path) -> Result<Self, String> {
        if let Some(rest) = text.strip_prefix("oci://") {
            return oci::OciRef::parse(rest).map(PluginSource::Oci);
        }
        if text.starts_with("https://") {
            return Ok(PluginSource::Url(text.to_owned()));
        }
        if text.starts_with("http://") {
            let host = url_host(text);
            if is_loopback(&host) {
                return Ok(PluginSource::Url(text.to_owned()));
            }
            return Err(format!(
                "{text}: plain http is only used for loopback addresses; use https://"
            ));
        }
        if text.contains("://") {
            return Err(format!(
                "{text}: unknown scheme; a plugin comes from a file, https:// or oci://"
            ));
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
) -> Result<Fetched, String> {
    let (bytes, digest, annotations) = match source {
        PluginSource::File(path) => (
            read_plugin_file(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?,
            None,
            Default::default(),
        ),
        PluginSource::Url(url) => {
            if expected_sha256.is_none() {
                return Err(format!(
                    "{url}: a download must be pinned; pass --sha256 with the hash its publisher gives"
                ));
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
        return Err(format!(
            "{} has sha256 {sha256}, not the {want} you pinned; refusing it",
            source.record()
        ));
    }
    Ok(Fetched {
        bytes,
        sha256,
        digest,
        annotations,
    })
}

async fn download(url: &str) -> Result<Vec<u8>, String> {
    let client = reqwest::Client::builder()
        .user_agent(concat!("corral/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| format!("cannot start an HTTP client: {e}"))?;
    let mut response = client
        .get(url)
        .send()
        .await
        .map_err(|e| format!("{url}: {}", crate::words::http(&e)))?;
    if !response.status().is_success() {
        return Err(format!("{url}: the server answered {}", response.status()));
    }
    let max = crate::trust::MAX_PLUGIN_FILE;
    let mut bytes = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| format!("{url}: {}", crate::words::http(&e)))?
    {
        bytes.extend_from_slice(&chunk);
        if bytes.len() as u64 > max {
            return Err(format!("{url}: larger than {} MB; refusing it", max >> 20));
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
