//! OCI registries: pulling and pushing a component in the Bytecode
//! Alliance's wasm artifact format (one `application/wasm` layer, an
//! `application/vnd.wasm.config.v0+json` config), with `oci-client` and
//! `oci-wasm`.
//!
//! Registries on a loopback address are spoken to over plain HTTP (a local
//! test registry has no certificate); every other one over HTTPS.
//! Credentials, when a registry needs them, come from
//! `CORRAL_REGISTRY_USERNAME` and `CORRAL_REGISTRY_PASSWORD`; without them
//! access is anonymous (public registries hand out anonymous tokens).
//! Every blob is checked against the digest the manifest names, and a
//! reference by digest (`@sha256:…`) against the manifest's own digest: a
//! registry that serves other bytes than it advertised is refused.

use crate::trust::sha256_hex;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use oci_wasm::{WasmClient, WasmConfig};
use std::collections::BTreeMap;
use std::fmt;

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
    pub fn parse(text: &str) -> Result<Self, String> {
        let first = text.split('/').next().unwrap_or("");
        let explicit = text.contains('/')
            && (first.contains('.') || first.contains(':') || first == "localhost");
        if !explicit {
            return Err(format!(
                "oci://{text}: name the registry, as in oci://ghcr.io/OWNER/PLUGIN:TAG"
            ));
        }
        let reference: Reference = text
            .parse()
            .map_err(|e| format!("oci://{text} is not a valid reference: {e}"))?;
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
    let protocol = if super::fetch::is_loopback(name) {
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

fn auth() -> RegistryAuth {
    match (
        std::env::var("CORRAL_REGISTRY_USERNAME"),
        std::env::var("CORRAL_REGISTRY_PASSWORD"),
    ) {
        (Ok(user), Ok(password)) => RegistryAuth::Basic(user, password),
        _ => RegistryAuth::Anonymous,
    }
}

/// Pulls the component `r` names and checks every digest.
pub async fn pull(r: &OciRef) -> Result<Pulled, String> {
    let image = client(r)
        .pull(&r.reference, &auth())
        .await
        .map_err(|e| format!("cannot pull oci://{r}: {e:#}"))?;
    let manifest = image
        .manifest
        .ok_or_else(|| format!("oci://{r}: the registry sent no manifest"))?;
    let [layer] = image.layers.as_slice() else {
        return Err(format!(
            "oci://{r}: a wasm artifact has exactly one layer, this one has {}",
            image.layers.len()
        ));
    };
    let want = manifest
        .layers
        .first()
        .map(|l| l.digest.clone())
        .unwrap_or_default();
    let got = format!("sha256:{}", sha256_hex(&layer.data));
    if got != want {
        return Err(format!(
            "oci://{r}: the component's bytes have digest {got}, but the manifest names {want}; \
             the registry or something between it and you altered it, refusing it"
        ));
    }
    let digest = image.digest.unwrap_or_default();
    if let Some(pinned) = r.reference.digest()
        && pinned != digest
    {
        return Err(format!(
            "oci://{r}: the registry sent manifest {digest}, not the {pinned} you asked for; refusing it"
        ));
    }
    Ok(Pulled {
        bytes: layer.data.to_vec(),
        digest,
        annotations: manifest.annotations.unwrap_or_default(),
    })
}

/// Pushes `bytes` as `r`, with `annotations` on the manifest. Returns the
/// manifest's URL.
pub async fn push(
    r: &OciRef,
    bytes: Vec<u8>,
    annotations: BTreeMap<String, String>,
) -> Result<String, String> {
    let (config, layer) = WasmConfig::from_raw_component(bytes, None)
        .map_err(|e| format!("not a component the wasm OCI format can describe: {e:#}"))?;
    let pushed = client(r)
        .push(&r.reference, &auth(), layer, config, Some(annotations))
        .await
        .map_err(|e| format!("cannot push oci://{r}: {e:#}"))?;
    Ok(pushed.manifest_url)
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
}
