//! corral's integration tests: one binary, real components built from
//! source (tests/programs, plugins/), real files in temp directories, real
//! processes and real HTTP on loopback.

mod cli;
mod manifest;
mod sandbox;
mod tools;

use corral::manifest::{Layer, Manifest, from_layers};
use corral::runtime::{Plugins, Runtime, RuntimeOptions, ToolError, ToolOutput};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// One runtime for the whole test binary, with a compile cache kept in the
/// target directory so components are compiled once across runs.
pub fn runtime() -> &'static Runtime {
    static RT: OnceLock<Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        Runtime::new(RuntimeOptions {
            cache_dir: Some(cache_dir()),
        })
        .expect("runtime")
    })
}

pub fn cache_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("component-cache")
}

/// A workspace in a temp dir, with a sibling directory outside it that holds
/// a secret the plugins must never see.
pub struct Sandbox {
    pub root: tempfile::TempDir,
}

pub const SECRET: &str = "TOP-SECRET-7f3a";

impl Sandbox {
    pub fn new() -> Self {
        let root = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(root.path().join("ws")).expect("ws");
        std::fs::create_dir(root.path().join("outside")).expect("outside");
        std::fs::write(root.path().join("outside/secret.txt"), SECRET).expect("secret");
        std::fs::write(
            root.path().join("ws/hello.txt"),
            "hello from the workspace\n",
        )
        .expect("hello");
        Self { root }
    }

    pub fn ws(&self) -> PathBuf {
        self.root.path().join("ws")
    }

    pub fn outside(&self) -> PathBuf {
        self.root.path().join("outside")
    }

    pub fn write(&self, rel: &str, content: &str) {
        let p = self.ws().join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::write(p, content).expect("write");
    }

    /// The manifest made of the single layer `toml` (no defaults).
    pub fn manifest(&self, toml: &str) -> Result<Manifest, String> {
        from_layers(&self.ws(), &[layer(&self.ws(), toml)]).map_err(|e| e.to_string())
    }

    /// The manifest with the built-in defaults under `toml`.
    pub fn manifest_with_defaults(&self, toml: &str) -> Result<Manifest, String> {
        let defaults = Layer {
            name: corral::manifest::DEFAULTS_NAME.into(),
            text: corral::manifest::DEFAULTS.into(),
            base: self.ws(),
        };
        from_layers(&self.ws(), &[defaults, layer(&self.ws(), toml)]).map_err(|e| e.to_string())
    }

    pub async fn load(&self, toml: &str) -> Result<Plugins, String> {
        let manifest = self.manifest(toml)?;
        runtime().load(&manifest).await.map_err(|e| e.to_string())
    }
}

pub fn layer(ws: &Path, toml: &str) -> Layer {
    Layer {
        name: "corral.toml".into(),
        text: toml.into(),
        base: ws.to_path_buf(),
    }
}

/// TOML for one plugin from a component path.
pub fn plugin_toml(name: &str, wasm: &str, rest: &str) -> String {
    format!("[plugins.{name}]\nsource = {wasm:?}\n{rest}\n")
}

pub async fn call(
    plugins: &Plugins,
    tool: &str,
    args: serde_json::Value,
) -> Result<ToolOutput, ToolError> {
    plugins.call(tool, &args.to_string(), "test").await
}

/// A sandbox error's message, or a panic that shows what came back instead.
pub fn sandbox_err(r: Result<ToolOutput, ToolError>) -> String {
    match r {
        Err(ToolError::Sandbox(m)) => m,
        other => panic!("expected a sandbox error, got {other:?}"),
    }
}

/// A tool failure's message (the guest saw an error), or a panic.
pub fn failed(r: Result<ToolOutput, ToolError>) -> String {
    match r {
        Err(ToolError::Failed(m)) => m,
        other => panic!("expected a tool failure, got {other:?}"),
    }
}
