//! OCI registries: pulling and pushing a component in the Bytecode
//! Alliance's wasm artifact format (one `application/wasm` layer, an
//! `application/vnd.wasm.config.v0+json` config), with `oci-client` and
//! `oci-wasm`.
//!
//! Registries on a loopback address are spoken to over plain HTTP (a local
//! test registry has no certificate); every other one over HTTPS.
//! Credentials, when a registry needs them, come from
//! `CORRAL_REGISTRY_USERNAME` and `CORRAL_REGISTRY_PASSWORD` and are bound to
//! the one registry `CORRAL_REGISTRY` names (`host[:port]`): a reference to
//! any other registry — one a project's `from = "oci://…"` chose, say — is
//! pulled anonymously, so a project cannot collect the user's password by
//! naming a registry of its own (public registries hand out anonymous tokens).
//!
//! The component layer is streamed to a temporary file beside the store, never
//! collected in memory: it is refused as soon as it passes the size limit
//! ([`layer_limit`]; the manifest's advertised size is checked before the
//! download), and its SHA-256 is computed while it streams. Every blob is
//! checked against the digest the manifest names, and a reference by digest
//! (`@sha256:…`) against the manifest's own digest: a registry that serves
//! other bytes than it advertised is refused.

use futures::{Stream, StreamExt as _};
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use oci_wasm::{WasmClient, WasmConfig};
use sha2::{Digest as _, Sha256};
use std::collections::BTreeMap;
use std::fmt;
use std::io::Write as _;
use std::path::Path;

/// The environment variable naming the registry (`host[:port]`) that
/// `CORRAL_REGISTRY_USERNAME`/`CORRAL_REGISTRY_PASSWORD` belong to.
pub const REGISTRY_ENV: &str = "CORRAL_REGISTRY";
/// The environment variable lowering the component layer's size limit, in KiB.
pub const LAYER_LIMIT_ENV: &str = "CORRAL_OCI_MAX_LAYER_KB";

/// Manifest annotation holding the plugin's version.
pub const VERSION_ANNOTATION: &str = "org.opencontainers.image.version";
/// Manifest annotation holding the plugin's name.
pub const TITLE_ANNOTATION: &str = "org.opencontainers.image.title";
/// Manifest annotation holding the plugin's description.
pub const DESCRIPTION_ANNOTATION: &str = "org.opencontainers.image.description";

/// `host[:port]/repository:tag` or `host[:port]/repository@sha256:…`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OciRef {
    reference: Reference,
}

impl fmt::Display for OciRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.reference.whole())
    }
}

impl OciRef {
    /// Parses a reference written after `oci://`. The registry must be
    /// explicit (`ghcr.io/…`, `127.0.0.1:5000/…`): no implied Docker Hub.
    pub fn parse(text: &str) -> Result<Self, OciError> {
        let first = text.split('/').next().unwrap_or("");
        let explicit = text.contains('/')
            && (first.contains('.') || first.contains(':') || first == "localhost");
        if !explicit {
            return Err(OciError::NoRegistry(text.to_owned()));
        }
        let reference: Reference = text.parse().map_err(|e| OciError::BadReference {
            text: text.to_owned(),
            why: format!("{e}"),
        })?;
        Ok(Self { reference })
    }

    /// The registry's host (and port).
    pub fn registry(&self) -> &str {
        self.reference.registry()
    }

    /// The same repository at `tag`.
    pub fn with_tag(&self, tag: &str) -> Self {
        Self {
            reference: Reference::with_tag(
                self.reference.registry().to_owned(),
                self.reference.repository().to_owned(),
                tag.to_owned(),
            ),
        }
    }
}

/// Why a reference, a pull or a push failed. Its text is the message for
/// the user and names the reference.
#[derive(Debug, thiserror::Error)]
pub enum OciError {
    /// The reference names no registry.
    #[error("oci://{0}: name the registry, as in oci://ghcr.io/OWNER/PLUGIN:TAG")]
    NoRegistry(String),
    /// The reference does not parse.
    #[error("oci://{text} is not a valid reference: {why}")]
    BadReference {
        /// What was written after `oci://`.
        text: String,
        /// The parser's reason.
        why: String,
    },
    /// `CORRAL_OCI_MAX_LAYER_KB` is not a number.
    #[error(transparent)]
    LayerLimit(#[from] LayerLimitError),
    /// The registry could not be reached or refused the request.
    #[error("cannot pull oci://{reference}: {why}{hint}")]
    Pull {
        /// The reference, without `oci://`.
        reference: String,
        /// The client's reason.
        why: String,
        /// Why credentials were not sent, when they were set (or empty).
        hint: String,
    },
    /// The artifact does not have exactly one layer.
    #[error("oci://{reference}: a wasm artifact has exactly one layer, this one has {layers}")]
    Layers {
        /// The reference, without `oci://`.
        reference: String,
        /// How many it has.
        layers: usize,
    },
    /// The artifact is not in the wasm component format.
    #[error(
        "oci://{reference} is not a wasm component artifact (layer {layer}, config {config}); \
         publish it with `corral plugin publish`"
    )]
    NotWasm {
        /// The reference, without `oci://`.
        reference: String,
        /// The layer's media type.
        layer: String,
        /// The config's media type.
        config: String,
    },
    /// A reference by digest got another manifest.
    #[error(
        "oci://{reference}: the registry sent manifest {got}, not the {pinned} you asked for; refusing it"
    )]
    ManifestDigest {
        /// The reference, without `oci://`.
        reference: String,
        /// The manifest's digest.
        got: String,
        /// The digest the reference names.
        pinned: String,
    },
    /// The layer is over the size limit.
    #[error(
        "oci://{reference}: the component layer is {size}, over the {} KiB limit; refusing it before \
         it fills the disk or memory (a larger limit: {}, at most {} KiB)",
        max >> 10,
        LAYER_LIMIT_ENV,
        crate::trust::MAX_PLUGIN_FILE >> 10
    )]
    TooLarge {
        /// The reference, without `oci://`.
        reference: String,
        /// Its size, in words (`N bytes`).
        size: String,
        /// The limit, in bytes.
        max: u64,
    },
    /// The layer's bytes do not hash to the digest the manifest names.
    #[error(
        "oci://{reference}: the component's bytes have digest {got}, but the manifest names {want}; \
         the registry or something between it and you altered it, refusing it"
    )]
    LayerDigest {
        /// The reference, without `oci://`.
        reference: String,
        /// The bytes' digest.
        got: String,
        /// The manifest's.
        want: String,
    },
    /// There is no directory to keep plugins in.
    #[error("no data directory to keep plugins in (set XDG_DATA_HOME or HOME)")]
    NoStore,
    /// The transfer or the temporary file failed.
    #[error("cannot pull oci://{reference}: {why}")]
    Transfer {
        /// The reference, without `oci://`.
        reference: String,
        /// The reason, in words.
        why: String,
    },
    /// The bytes to push are no component the format can describe.
    #[error("not a component the wasm OCI format can describe: {0}")]
    NotComponent(String),
    /// The registry refused the push.
    #[error("cannot push oci://{reference}: {why}{hint}")]
    Push {
        /// The reference, without `oci://`.
        reference: String,
        /// The client's reason.
        why: String,
        /// Why credentials were not sent, when they were set (or empty).
        hint: String,
    },
}

impl From<OciError> for String {
    fn from(e: OciError) -> Self {
        e.to_string()
    }
}

/// A pulled component.
#[derive(Debug)]
pub struct Pulled {
    /// The component.
    pub bytes: Vec<u8>,
    /// The manifest's digest, `sha256:…`.
    pub digest: String,
    /// The manifest's annotations.
    pub annotations: BTreeMap<String, String>,
}

fn client(r: &OciRef) -> WasmClient {
    let host = r.registry().to_owned();
    let name = host.rsplit_once(':').map_or(host.as_str(), |(h, _)| h);
    let name = name.trim_start_matches('[').trim_end_matches(']');
    let protocol = if is_loopback(name) {
        ClientProtocol::HttpsExcept(vec![host])
    } else {
        ClientProtocol::Https
    };
    WasmClient::new(Client::new(ClientConfig {
        protocol,
        user_agent: concat!("corral/", env!("CARGO_PKG_VERSION")),
        ..Default::default()
    }))
}

/// The credentials for `r`'s registry: the user's, only when `CORRAL_REGISTRY`
/// names that very registry; anonymous otherwise.
fn auth(r: &OciRef) -> RegistryAuth {
    let bound = std::env::var(REGISTRY_ENV).ok();
    credentials(r.registry(), bound.as_deref())
}

/// Whether credentials are set but were withheld from `registry`, for the
/// hint in an error message.
fn withheld(registry: &str) -> Option<String> {
    std::env::var_os("CORRAL_REGISTRY_USERNAME")?;
    match std::env::var(REGISTRY_ENV) {
        Ok(bound) if same_registry(&bound, registry) => None,
        Ok(bound) => Some(format!(
            " (CORRAL_REGISTRY_USERNAME was not sent: it belongs to `{REGISTRY_ENV}={}`, \
             not `{registry}`; set {REGISTRY_ENV}={registry} if you mean to log in there)",
            crate::terminal::inert_line(&bound),
            registry = crate::terminal::inert_line(registry),
        )),
        Err(_) => Some(format!(
            " (CORRAL_REGISTRY_USERNAME was not sent: credentials go only to the registry \
             {REGISTRY_ENV} names; set {REGISTRY_ENV}={registry} to log in there)"
        )),
    }
}

fn same_registry(a: &str, b: &str) -> bool {
    a.trim().eq_ignore_ascii_case(b.trim())
}

fn credentials(registry: &str, bound: Option<&str>) -> RegistryAuth {
    let Some(bound) = bound else {
        return RegistryAuth::Anonymous;
    };
    if !same_registry(bound, registry) {
        return RegistryAuth::Anonymous;
    }
    match (
        std::env::var("CORRAL_REGISTRY_USERNAME"),
        std::env::var("CORRAL_REGISTRY_PASSWORD"),
    ) {
        (Ok(user), Ok(password)) => RegistryAuth::Basic(user, password),
        _ => RegistryAuth::Anonymous,
    }
}

/// The largest component layer corral pulls: [`crate::trust::MAX_PLUGIN_FILE`]
/// (the largest component it loads), or less when `CORRAL_OCI_MAX_LAYER_KB`
/// says so. A value that is not a number is an error, not the default.
pub fn layer_limit() -> Result<u64, LayerLimitError> {
    let max = crate::trust::MAX_PLUGIN_FILE;
    match std::env::var(LAYER_LIMIT_ENV) {
        Err(_) => Ok(max),
        Ok(v) => v
            .trim()
            .parse::<u64>()
            .map(|kb| kb.saturating_mul(1024).min(max))
            .map_err(|_| LayerLimitError {
                value: v.clone(),
                default_mib: max >> 20,
            }),
    }
}

/// Why `CORRAL_OCI_MAX_LAYER_KB` sets no limit: its value is not a number.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{}={}` is not a whole number of KiB; set it to e.g. 65536 (64 MiB), or unset it for {} MiB",
    LAYER_LIMIT_ENV,
    crate::terminal::inert_line(value),
    default_mib
)]
pub struct LayerLimitError {
    /// The variable's value.
    pub value: String,
    /// The limit when it is unset, in MiB.
    pub default_mib: u64,
}

/// Pulls the component `r` names and checks every digest.
pub async fn pull(r: &OciRef) -> Result<Pulled, OciError> {
    let max = layer_limit()?;
    let client = client(r);
    let auth = auth(r);
    let (manifest, digest) = client
        .pull_image_manifest(&r.reference, &auth)
        .await
        .map_err(|e| pull_failed(r, &e))?;
    let [layer] = manifest.layers.as_slice() else {
        return Err(OciError::Layers {
            reference: r.to_string(),
            layers: manifest.layers.len(),
        });
    };
    if layer.media_type != oci_wasm::WASM_LAYER_MEDIA_TYPE
        || manifest.config.media_type != oci_wasm::WASM_MANIFEST_CONFIG_MEDIA_TYPE
    {
        return Err(OciError::NotWasm {
            reference: r.to_string(),
            layer: layer.media_type.clone(),
            config: manifest.config.media_type.clone(),
        });
    }
    if let Some(pinned) = r.reference.digest()
        && pinned != digest
    {
        return Err(OciError::ManifestDigest {
            reference: r.to_string(),
            got: digest,
            pinned: pinned.to_owned(),
        });
    }
    if u64::try_from(layer.size).unwrap_or(u64::MAX) > max {
        return Err(over_limit(r, &format!("{} bytes", layer.size), max));
    }
    let dir = super::store::dir().ok_or(OciError::NoStore)?;
    let stream = client
        .pull_blob_stream(&r.reference, layer)
        .await
        .map_err(|e| pull_failed(r, &e))?;
    if stream.content_length.is_some_and(|n| n > max) {
        return Err(over_limit(r, &format!("{} bytes", layer.size), max));
    }
    let bytes = save_capped(stream, max, &layer.digest, &dir)
        .await
        .map_err(|e| match e {
            SaveError::TooLarge => over_limit(r, "more bytes than that", max),
            SaveError::Digest { got } => OciError::LayerDigest {
                reference: r.to_string(),
                got,
                want: layer.digest.clone(),
            },
            SaveError::Io(why) => OciError::Transfer {
                reference: r.to_string(),
                why,
            },
        })?;
    Ok(Pulled {
        bytes,
        digest,
        annotations: manifest.annotations.unwrap_or_default(),
    })
}

/// The registry of `r` refused or failed a pull: `e`, and the hint of a
/// withheld credential.
fn pull_failed(r: &OciRef, e: &dyn std::fmt::Display) -> OciError {
    OciError::Pull {
        reference: r.to_string(),
        why: format!("{e:#}"),
        hint: withheld(r.registry()).unwrap_or_default(),
    }
}

fn over_limit(r: &OciRef, size: &str, max: u64) -> OciError {
    OciError::TooLarge {
        reference: r.to_string(),
        size: size.to_owned(),
        max,
    }
}

/// Why [`save_capped`] refused a blob.
#[derive(Debug)]
enum SaveError {
    /// More than the limit arrived.
    TooLarge,
    /// The bytes hash to another digest than the manifest names.
    Digest { got: String },
    /// The temporary file or the transfer failed.
    Io(String),
}

/// Streams `blob` into a temporary file in `dir` (removed whatever
/// happens), stopping as soon as more than `max` bytes arrived, hashes it on
/// the way and checks the hash against `want` (`sha256:…`). Returns the
/// bytes, which are then at most `max`.
async fn save_capped<S, B, E>(
    mut blob: S,
    max: u64,
    want: &str,
    dir: &Path,
) -> Result<Vec<u8>, SaveError>
where
    S: Stream<Item = Result<B, E>> + Unpin,
    B: AsRef<[u8]>,
    E: fmt::Display,
{
    std::fs::create_dir_all(dir)
        .map_err(|e| SaveError::Io(format!("cannot create {}: {e}", dir.display())))?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".pull-")
        .tempfile_in(dir)
        .map_err(|e| SaveError::Io(format!("cannot create a file in {}: {e}", dir.display())))?;
    let mut hasher = Sha256::new();
    let mut total: u64 = 0;
    while let Some(chunk) = blob.next().await {
        let chunk = chunk.map_err(|e| SaveError::Io(e.to_string()))?;
        let chunk = chunk.as_ref();
        total = total.saturating_add(chunk.len() as u64);
        if total > max {
            return Err(SaveError::TooLarge);
        }
        hasher.update(chunk);
        tmp.write_all(chunk)
            .map_err(|e| SaveError::Io(format!("cannot write {}: {e}", tmp.path().display())))?;
    }
    let got = format!("sha256:{}", hex::encode(hasher.finalize()));
    if !got.eq_ignore_ascii_case(want) {
        return Err(SaveError::Digest { got });
    }
    tmp.flush()
        .map_err(|e| SaveError::Io(format!("cannot write {}: {e}", tmp.path().display())))?;
    crate::fsread::read_regular(tmp.path(), max)
        .map_err(|e| SaveError::Io(format!("cannot read {}: {e}", tmp.path().display())))
}

/// Pushes `bytes` as `r`, with `annotations` on the manifest. Returns the
/// manifest's URL.
pub async fn push(
    r: &OciRef,
    bytes: Vec<u8>,
    annotations: BTreeMap<String, String>,
) -> Result<String, OciError> {
    let (config, layer) = WasmConfig::from_raw_component(bytes, None)
        .map_err(|e| OciError::NotComponent(format!("{e:#}")))?;
    let pushed = client(r)
        .push(&r.reference, &auth(r), layer, config, Some(annotations))
        .await
        .map_err(|e| OciError::Push {
            reference: r.to_string(),
            why: format!("{e:#}"),
            hint: withheld(r.registry()).unwrap_or_default(),
        })?;
    Ok(pushed.manifest_url)
}

/// Whether `host` names this machine: `localhost`, 127.0.0.0/8 or `::1`.
pub fn is_loopback(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reference_must_name_its_registry() {
        assert!(OciRef::parse("127.0.0.1:5000/tools/wc:1.0").is_ok());
        assert!(OciRef::parse("ghcr.io/me/wc:1").is_ok());
        assert!(OciRef::parse("localhost/wc:1").is_ok());
        assert!(OciRef::parse("me/wc:1").is_err());
        assert!(OciRef::parse("wc").is_err());
    }

    fn chunks(parts: Vec<Vec<u8>>) -> impl Stream<Item = Result<Vec<u8>, String>> + Unpin {
        futures::stream::iter(parts.into_iter().map(Ok))
    }

    fn leftovers(dir: &Path) -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    }

    #[tokio::test]
    async fn a_layer_is_cut_off_at_the_limit_and_its_file_removed() {
        let dir = tempfile::tempdir().unwrap();
        // A registry may advertise a small size and send more: the stream
        // itself is counted.
        let blob = chunks(vec![vec![7u8; 600]; 4]);
        let e = save_capped(blob, 1000, "sha256:00", dir.path())
            .await
            .unwrap_err();
        assert!(matches!(e, SaveError::TooLarge), "{e:?}");
        assert!(leftovers(dir.path()).is_empty());
        let data = vec![vec![1u8; 300], vec![2u8; 300]];
        let want = format!("sha256:{}", crate::trust::sha256_hex(&data.concat()));
        let got = save_capped(chunks(data.clone()), 1000, &want, dir.path())
            .await
            .unwrap();
        assert_eq!(got, data.concat());
        let e = save_capped(chunks(vec![vec![3u8; 10]]), 1000, &want, dir.path())
            .await
            .unwrap_err();
        assert!(matches!(e, SaveError::Digest { .. }), "{e:?}");
        assert!(leftovers(dir.path()).is_empty());
    }

    #[test]
    fn credentials_go_only_to_the_registry_the_user_named() {
        assert_eq!(credentials("127.0.0.1:5000", None), RegistryAuth::Anonymous);
        assert_eq!(
            credentials("evil.example:443", Some("ghcr.io")),
            RegistryAuth::Anonymous
        );
    }
}
