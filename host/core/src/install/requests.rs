//! What a plugin asks for, carried inside its component: a custom section
//! named [`SECTION`] holding the TOML text of a `corral-plugin.toml`.
//!
//! ```toml
//! [plugin]
//! name = "wordcount"
//! version = "0.1.0"
//! description = "Counts lines and words"
//!
//! [requests]
//! fs = [{ path = ".", access = "ro" }]
//! net = ["https://api.example.com:443"]
//! env = ["LANG"]
//! exec = [{ program = "git", args = ["status", "**"] }]
//! secrets = [{ origin = "https://api.example.com:443", header = "authorization", value = "Bearer ${env:EXAMPLE_KEY}" }]
//! ```
//!
//! Requests are only requests: nothing is granted until the user approves
//! them, and what is approved is written to the manifest, which is all the
//! runtime ever reads. The Rust SDK writes the section from
//! `corral_sdk::requests!`; `corral plugin pack` adds it to any component.
//! A section at the component's top level wins over one inside a nested
//! core module (where the SDK's lands), so packing replaces what a
//! toolchain embedded.

use serde::{Deserialize, Serialize};

/// Name of the custom section that carries the requests.
pub const SECTION: &str = "corral-requests";

/// Largest requests text read; anything longer is refused.
const MAX_TEXT: usize = 64 << 10;

/// Why a requests text was refused; its text is the message for the user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestsError {
    /// The text is longer than corral reads.
    #[error("the requests are {0} bytes; at most {MAX_TEXT} are read")]
    TooLong(usize),
    /// The text is not TOML of the expected shape.
    #[error("{0}")]
    Toml(String),
    /// `[plugin] name` is not a valid plugin name.
    #[error("[plugin] name `{0}`: use letters, digits, `-` and `_`")]
    Name(String),
    /// An `fs` request leaves the workspace.
    #[error("requests.fs `{0}`: a plugin may only ask for directories inside the workspace")]
    Outside(String),
    /// An `exec` request names no program or no argument patterns.
    #[error("requests.exec `{0}`: name a program and its argument patterns")]
    Exec(String),
    /// A secret's value is a literal, not taken from the environment.
    #[error(
        "requests.secrets for {0}: the value must come from the user's environment \
         (`${{env:NAME}}`), never a literal"
    )]
    LiteralSecret(String),
}

/// Why a component's binary could not be read as sections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BinaryError {
    /// The bytes are no WebAssembly binary.
    #[error("not a WebAssembly binary")]
    NotWasm,
    /// A section header is cut short.
    #[error("truncated section header")]
    Truncated,
    /// A section size is not a valid LEB128 number.
    #[error("malformed section size")]
    Malformed,
    /// A section size does not fit in memory.
    #[error("section too large")]
    TooLarge,
    /// A section runs past the end of the file.
    #[error("a section runs past the end of the file")]
    PastEnd,
    /// A custom section's name length is out of range.
    #[error("bad name")]
    BadName,
    /// A custom section's name runs past the section.
    #[error("a custom section's name runs past its end")]
    NamePastEnd,
    /// Components are nested deeper than corral reads.
    #[error("components nested too deeply")]
    TooDeep,
}

/// Why the requests embedded in a component could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EmbeddedError {
    /// The binary itself is malformed.
    #[error(transparent)]
    Binary(#[from] BinaryError),
    /// The section is not UTF-8.
    #[error("its `{SECTION}` section is not UTF-8 text")]
    NotUtf8,
    /// The section's text is refused.
    #[error("its `{SECTION}` section: {0}")]
    Requests(RequestsError),
}

impl From<RequestsError> for String {
    fn from(e: RequestsError) -> Self {
        e.to_string()
    }
}

impl From<BinaryError> for String {
    fn from(e: BinaryError) -> Self {
        e.to_string()
    }
}

impl From<EmbeddedError> for String {
    fn from(e: EmbeddedError) -> Self {
        e.to_string()
    }
}

/// A plugin's `corral-plugin.toml`: who it is and what it asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Requests {
    /// `[plugin]`
    #[serde(default)]
    pub plugin: PluginInfo,
    /// `[requests]`
    #[serde(default)]
    pub requests: Requested,
}

/// `[plugin]`: the plugin's name, version and a one-line description.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginInfo {
    /// The name its manifest entry gets by default.
    pub name: Option<String>,
    /// Its version, shown by `plugin list` and `plugin update`.
    pub version: Option<String>,
    /// What it is for.
    pub description: Option<String>,
}

/// `[requests]`: the grants a plugin would like, in the manifest's terms.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Requested {
    /// Directories, relative to the workspace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fs: Vec<FsRequest>,
    /// Network destinations, `scheme://host:port`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub net: Vec<String>,
    /// Environment variables.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    /// Programs, with argument patterns.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exec: Vec<ExecRequest>,
    /// Headers the host adds to requests for an origin.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<SecretRequest>,
}

/// A directory request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FsRequest {
    /// Relative to the workspace root; it may not leave it.
    pub path: String,
    /// `ro` or `rw`.
    pub access: crate::manifest::Access,
}

/// A program request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecRequest {
    /// A program name found in `PATH`.
    pub program: String,
    /// Argument patterns: literal tokens, `*` (one), `**` (the rest).
    #[serde(default)]
    pub args: Vec<String>,
    /// Whether the program may open network connections.
    #[serde(default, skip_serializing_if = "is_false")]
    pub network: bool,
}

/// A secret request: the host adds `header: value` to requests for `origin`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretRequest {
    /// `scheme://host:port`.
    pub origin: String,
    /// The header's name.
    pub header: String,
    /// The value, which may only take secrets from corral's environment
    /// (`Bearer ${env:EXAMPLE_KEY}`); default `${env:NAME_API_KEY}`-free
    /// values are refused so a request cannot smuggle a literal credential.
    pub value: String,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl Requests {
    /// Parses a `corral-plugin.toml` text, strictly, and checks what it asks
    /// for makes sense on its own (the manifest checker runs again on what
    /// the user approves).
    pub fn parse(text: &str) -> Result<Self, RequestsError> {
        if text.len() > MAX_TEXT {
            return Err(RequestsError::TooLong(text.len()));
        }
        let requests: Requests =
            toml::from_str(text).map_err(|e| RequestsError::Toml(e.to_string()))?;
        requests.check()?;
        Ok(requests)
    }

    /// The TOML text, as embedded and as written by `plugin pack`.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).unwrap_or_default()
    }

    fn check(&self) -> Result<(), RequestsError> {
        if let Some(name) = &self.plugin.name
            && !crate::manifest::valid_plugin_name(name)
        {
            return Err(RequestsError::Name(name.clone()));
        }
        for fs in &self.requests.fs {
            let path = std::path::Path::new(&fs.path);
            if path.is_absolute()
                || path
                    .components()
                    .any(|c| matches!(c, std::path::Component::ParentDir))
            {
                return Err(RequestsError::Outside(fs.path.clone()));
            }
        }
        for exec in &self.requests.exec {
            if exec.program.is_empty() || exec.program == "*" && exec.args.is_empty() {
                return Err(RequestsError::Exec(exec.program.clone()));
            }
        }
        for secret in &self.requests.secrets {
            if !secret.value.contains("${env:") {
                return Err(RequestsError::LiteralSecret(secret.origin.clone()));
            }
        }
        Ok(())
    }

    /// Whether it asks for nothing.
    pub fn is_empty(&self) -> bool {
        self.requests == Requested::default()
    }
}

/// The requests embedded in a component: the top-level section if there is
/// one, else the first inside a nested module or component. `Ok(None)` when
/// there is none; an error when one is there but unreadable.
pub fn embedded(bytes: &[u8]) -> Result<Option<Requests>, EmbeddedError> {
    let mut found: Option<(usize, &[u8])> = None;
    walk(bytes, 0, &mut |depth, name, payload| {
        if name == SECTION && found.is_none_or(|(d, _)| depth < d) {
            found = Some((depth, payload));
        }
    })?;
    let Some((_, payload)) = found else {
        return Ok(None);
    };
    let text = std::str::from_utf8(payload).map_err(|_| EmbeddedError::NotUtf8)?;
    Requests::parse(text)
        .map(Some)
        .map_err(EmbeddedError::Requests)
}

/// `bytes` with `requests` as its top-level [`SECTION`], replacing any
/// top-level one it had.
pub fn embed(bytes: &[u8], requests: &Requests) -> Result<Vec<u8>, BinaryError> {
    let sections = sections(bytes)?;
    let mut out = bytes[..8].to_vec();
    for s in &sections {
        if s.custom_name.as_deref() != Some(SECTION) {
            out.extend_from_slice(&bytes[s.start..s.end]);
        }
    }
    let text = requests.to_toml();
    let mut payload = Vec::new();
    leb128(&mut payload, SECTION.len() as u64);
    payload.extend_from_slice(SECTION.as_bytes());
    payload.extend_from_slice(text.as_bytes());
    out.push(0);
    leb128(&mut out, payload.len() as u64);
    out.extend_from_slice(&payload);
    Ok(out)
}

fn leb128(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

fn read_leb(bytes: &[u8], at: &mut usize) -> Result<u64, BinaryError> {
    let mut v: u64 = 0;
    for shift in (0..35).step_by(7) {
        let b = *bytes.get(*at).ok_or(BinaryError::Truncated)?;
        *at += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err(BinaryError::Malformed)
}

/// One section of a module or component binary.
struct Section {
    id: u8,
    start: usize,
    payload: usize,
    end: usize,
    custom_name: Option<String>,
}

/// The top-level sections of a module or component binary.
fn sections(bytes: &[u8]) -> Result<Vec<Section>, BinaryError> {
    if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
        return Err(BinaryError::NotWasm);
    }
    let mut out = Vec::new();
    let mut at = 8;
    while at < bytes.len() {
        let start = at;
        let id = bytes[at];
        at += 1;
        let size = usize::try_from(read_leb(bytes, &mut at)?).map_err(|_| BinaryError::TooLarge)?;
        let payload = at;
        let end = payload
            .checked_add(size)
            .filter(|&e| e <= bytes.len())
            .ok_or(BinaryError::PastEnd)?;
        let custom_name = if id == 0 {
            let mut p = payload;
            let len =
                usize::try_from(read_leb(bytes, &mut p)?).map_err(|_| BinaryError::BadName)?;
            let name = bytes
                .get(p..p.checked_add(len).ok_or(BinaryError::BadName)?)
                .filter(|_| p + len <= end)
                .ok_or(BinaryError::NamePastEnd)?;
            Some(String::from_utf8_lossy(name).into_owned())
        } else {
            None
        };
        out.push(Section {
            id,
            start,
            payload,
            end,
            custom_name,
        });
        at = end;
    }
    Ok(out)
}

/// Calls `f(depth, name, payload)` for every custom section of `bytes` and
/// of the modules and components nested in it.
fn walk<'a>(
    bytes: &'a [u8],
    depth: usize,
    f: &mut dyn FnMut(usize, &str, &'a [u8]),
) -> Result<(), BinaryError> {
    if depth > 16 {
        return Err(BinaryError::TooDeep);
    }
    let is_component = bytes.get(4..8).is_some_and(|v| v[2..] == [1, 0]);
    for s in sections(bytes)? {
        match (s.id, &s.custom_name) {
            (0, Some(name)) => {
                let mut p = s.payload;
                let _ = read_leb(bytes, &mut p)?;
                f(depth, name, &bytes[p + name.len()..s.end]);
            }
            // Nested core modules (1) and components (4) of a component.
            (1 | 4, _) if is_component => walk(&bytes[s.payload..s.end], depth + 1, f)?,
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"
[plugin]
name = "wc"
version = "1.0.0"
[requests]
fs = [{ path = ".", access = "ro" }]
net = ["https://api.example.com:443"]
"#;

    fn component() -> Vec<u8> {
        // An empty component: magic, version 0x0d, layer 1.
        b"\0asm\x0d\0\x01\0".to_vec()
    }

    #[test]
    fn embedding_then_reading_gives_the_same_requests() {
        let r = Requests::parse(TEXT).unwrap();
        let packed = embed(&component(), &r).unwrap();
        assert_eq!(embedded(&packed).unwrap(), Some(r.clone()));
        // Packing again replaces the section instead of adding a second.
        let mut other = r.clone();
        other.plugin.version = Some("2.0.0".into());
        let repacked = embed(&packed, &other).unwrap();
        assert_eq!(embedded(&repacked).unwrap(), Some(other));
        assert_eq!(
            sections(&repacked)
                .unwrap()
                .iter()
                .filter(|s| s.custom_name.as_deref() == Some(SECTION))
                .count(),
            1
        );
    }

    #[test]
    fn requests_that_leave_the_workspace_or_carry_a_literal_secret_are_refused() {
        let outside = "[requests]\nfs = [{ path = \"../x\", access = \"ro\" }]";
        let literal = "[requests]\nsecrets = [{ origin = \"https://a:443\", header = \"x\", value = \"sk-123\" }]";
        for (text, why) in [
            (outside, "inside the workspace"),
            (literal, "never a literal"),
        ] {
            let error = Requests::parse(text).unwrap_err().to_string();
            assert!(error.contains(why), "{error}");
        }
        assert!(Requests::parse("[requests]\nfoo = 1").is_err());
    }

    #[test]
    fn a_truncated_binary_is_an_error_not_a_panic() {
        let r = Requests::parse(TEXT).unwrap();
        let packed = embed(&component(), &r).unwrap();
        for cut in 0..packed.len() {
            let _ = embedded(&packed[..cut]);
        }
        assert!(embedded(b"not wasm").is_err());
    }
}
