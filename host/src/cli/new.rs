//! `corral plugin new` and `corral plugin wit`: a project to start a tool
//! plugin from, in Rust, Python or JavaScript, and the WIT it builds against.
//!
//! Everything is embedded in the binary: the WIT it serves, the WASI 0.2
//! packages wasmtime-wasi 48 serves (copied from the wasmtime-wasi-http
//! crate, `wit/deps/`, into `new/wit-deps/`), the Rust SDK's source and the
//! templates. A project never points at a corral checkout, since toolchains
//! may rewrite the WIT they are given.

use super::{fail, out};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The WIT of `corral:plugin`, as this binary serves it.
const CORRAL_WIT: &[(&str, &str)] = &[
    ("answer.wit", include_str!("../../../wit/answer.wit")),
    ("chat.wit", include_str!("../../../wit/chat.wit")),
    ("files.wit", include_str!("../../../wit/files.wit")),
    ("hook.wit", include_str!("../../../wit/hook.wit")),
    ("host.wit", include_str!("../../../wit/host.wit")),
    ("process.wit", include_str!("../../../wit/process.wit")),
    ("provider.wit", include_str!("../../../wit/provider.wit")),
    ("stream.wit", include_str!("../../../wit/stream.wit")),
    ("tool.wit", include_str!("../../../wit/tool.wit")),
    ("types.wit", include_str!("../../../wit/types.wit")),
    ("worlds.wit", include_str!("../../../wit/worlds.wit")),
];

/// The WASI 0.2 packages the host serves, for worlds that import them.
const WASI_DEPS: &[(&str, &str)] = &[
    ("cli.wit", include_str!("new/wit-deps/cli.wit")),
    ("clocks.wit", include_str!("new/wit-deps/clocks.wit")),
    (
        "filesystem.wit",
        include_str!("new/wit-deps/filesystem.wit"),
    ),
    ("http.wit", include_str!("new/wit-deps/http.wit")),
    ("io.wit", include_str!("new/wit-deps/io.wit")),
    ("random.wit", include_str!("new/wit-deps/random.wit")),
    ("sockets.wit", include_str!("new/wit-deps/sockets.wit")),
];

/// The Rust SDK's source, written beside a Rust project.
const SDK_SOURCES: &[(&str, &str)] = &[
    ("cassette.rs", include_str!("../../../sdk/src/cassette.rs")),
    ("files.rs", include_str!("../../../sdk/src/files.rs")),
    ("hook.rs", include_str!("../../../sdk/src/hook.rs")),
    ("http.rs", include_str!("../../../sdk/src/http.rs")),
    ("lib.rs", include_str!("../../../sdk/src/lib.rs")),
    ("process.rs", include_str!("../../../sdk/src/process.rs")),
    ("provider.rs", include_str!("../../../sdk/src/provider.rs")),
    ("sse.rs", include_str!("../../../sdk/src/sse.rs")),
    ("testing.rs", include_str!("../../../sdk/src/testing.rs")),
];
const SDK_MANIFEST: &str = include_str!("../../../sdk/Cargo.toml");
/// The workspace manifest, whose `[workspace.dependencies]` give the SDK's
/// dependency versions.
const WORKSPACE_MANIFEST: &str = include_str!("../../../Cargo.toml");

const README: &str = include_str!("new/README.md");
const PLUGIN_TOML: &str = include_str!("new/corral-plugin.toml");

/// The language of a new plugin project.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum Lang {
    /// Rust with the corral SDK (`cargo build --release --target wasm32-wasip2`).
    Rust,
    /// Python with componentize-py.
    #[value(alias = "py")]
    Python,
    /// JavaScript with componentize-js and jco.
    #[value(alias = "javascript")]
    Js,
}

impl Lang {
    fn title(self) -> &'static str {
        match self {
            Lang::Rust => "Rust",
            Lang::Python => "Python",
            Lang::Js => "JavaScript",
        }
    }

    /// The template's own files, as (path, text) before substitution.
    fn files(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Lang::Rust => &[
                ("Cargo.toml", include_str!("new/rust/Cargo.toml")),
                ("src/lib.rs", include_str!("new/rust/src/lib.rs")),
                (".gitignore", include_str!("new/rust/gitignore")),
            ],
            Lang::Python => &[
                ("pyproject.toml", include_str!("new/python/pyproject.toml")),
                ("app.py", include_str!("new/python/app.py")),
                ("corral_tool.py", include_str!("new/python/corral_tool.py")),
                ("tools.py", include_str!("new/python/tools.py")),
                ("test_tools.py", include_str!("new/python/test_tools.py")),
                (".gitignore", include_str!("new/python/gitignore")),
            ],
            Lang::Js => &[
                ("package.json", include_str!("new/js/package.json")),
                ("jsconfig.json", include_str!("new/js/jsconfig.json")),
                ("src/app.js", include_str!("new/js/src/app.js")),
                (
                    "src/corral-tool.js",
                    include_str!("new/js/src/corral-tool.js"),
                ),
                ("src/tools.js", include_str!("new/js/src/tools.js")),
                (
                    "test/tools.test.js",
                    include_str!("new/js/test/tools.test.js"),
                ),
                (".gitignore", include_str!("new/js/gitignore")),
            ],
        }
    }

    fn readme_sections(self) -> (&'static str, &'static str) {
        match self {
            Lang::Rust => (
                include_str!("new/rust/README.section.md"),
                include_str!("new/rust/files.section.md"),
            ),
            Lang::Python => (
                include_str!("new/python/README.section.md"),
                include_str!("new/python/files.section.md"),
            ),
            Lang::Js => (
                include_str!("new/js/README.section.md"),
                include_str!("new/js/files.section.md"),
            ),
        }
    }

    /// Where the build puts the component, relative to the project.
    fn wasm(self, name: &str) -> String {
        match self {
            Lang::Rust => format!("target/wasm32-wasip2/release/{}.wasm", snake(name)),
            Lang::Python | Lang::Js => format!("{name}.wasm"),
        }
    }

    /// The one command that builds the project.
    fn build_command(self, name: &str) -> String {
        match self {
            Lang::Rust => "cargo build --release --target wasm32-wasip2".to_owned(),
            Lang::Python => {
                format!(
                    ".venv/bin/componentize-py -d wit -w tool-plugin componentize app -o {name}.wasm"
                )
            }
            Lang::Js => "npm run build".to_owned(),
        }
    }

    fn setup_command(self) -> Option<&'static str> {
        match self {
            Lang::Rust => None,
            Lang::Python => {
                Some("python3 -m venv .venv && .venv/bin/pip install componentize-py==0.25.1")
            }
            Lang::Js => Some("npm install"),
        }
    }
}

fn snake(name: &str) -> String {
    name.replace('-', "_")
}

/// `corral plugin wit --out DIR`.
pub(super) fn wit(dir: &Path) -> ExitCode {
    let files = wit_files();
    match write_all(dir, &files) {
        Ok(()) => {
            out(&format!(
                "wrote {} files to {}: corral:plugin@0.1.0 (worlds tool-plugin, provider-plugin, hook-plugin) \
                 and under deps/ the WASI 0.2 packages it serves",
                files.len(),
                dir.display()
            ));
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}

/// The files `plugin wit` writes, relative to its output directory.
fn wit_files() -> Vec<(PathBuf, String)> {
    let corral = CORRAL_WIT
        .iter()
        .map(|(name, text)| (PathBuf::from(name), (*text).to_owned()));
    let deps = WASI_DEPS
        .iter()
        .map(|(name, text)| (Path::new("deps").join(name), (*text).to_owned()));
    corral.chain(deps).collect()
}

/// `corral plugin new NAME --lang L [--dir PATH]`.
pub(super) fn new(name: &str, lang: Lang, dir: Option<PathBuf>) -> ExitCode {
    if !valid_name(name) {
        return fail(&format!(
            "`{name}` is not a valid plugin name: use lowercase letters, digits, `-` and `_`, starting with a letter \
             (the name is the `[plugins.NAME]` key in corral.toml)"
        ));
    }
    let dir = dir.unwrap_or_else(|| PathBuf::from(name));
    if std::fs::read_dir(&dir).is_ok_and(|mut entries| entries.next().is_some()) {
        return fail(&format!(
            "{} already exists and is not empty; choose another --dir",
            dir.display()
        ));
    }
    let files = match project_files(name, lang, &dir) {
        Ok(files) => files,
        Err(e) => return fail(&e),
    };
    if let Err(e) = write_all(&dir, &files) {
        return fail(&e);
    }
    let mut next = format!(
        "created {} plugin `{name}` in {}\n\nnext:\n  cd {}\n",
        lang.title(),
        dir.display(),
        dir.display()
    );
    if let Some(setup) = lang.setup_command() {
        next.push_str(&format!("  {setup}\n"));
    }
    next.push_str(&format!(
        "  {}      # writes {}\n\nthen add it to a workspace's corral.toml as its README shows",
        lang.build_command(name),
        lang.wasm(name)
    ));
    out(&next);
    ExitCode::SUCCESS
}

/// The same rule as plugin names in the manifest.
fn valid_name(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

/// Every file of a new project, relative to its directory `dir`.
fn project_files(name: &str, lang: Lang, dir: &Path) -> Result<Vec<(PathBuf, String)>, String> {
    let cwd =
        std::env::current_dir().map_err(|e| format!("cannot read the current directory: {e}"))?;
    let wasm_abs = cwd.join(dir).join(lang.wasm(name));
    let (section, file_notes) = lang.readme_sections();
    let fill = |text: &str| {
        text.replace("{{lang_section}}", section.trim_end())
            .replace("{{lang_files}}", file_notes.trim_end())
            .replace("{{lang_title}}", lang.title())
            .replace("{{wasm_abs}}", &wasm_abs.display().to_string())
            .replace("{{wasm_rel}}", &lang.wasm(name))
            .replace(
                "{{requests_note}}",
                match lang {
                    Lang::Rust => {
                        " (`corral_sdk::requests!` in `src/lib.rs` already does it at build time)"
                    }
                    Lang::Python | Lang::Js => "",
                },
            )
            .replace("{{snake}}", &snake(name))
            .replace("{{name}}", name)
    };
    let mut files = vec![
        (PathBuf::from("README.md"), fill(README)),
        (PathBuf::from("corral-plugin.toml"), fill(PLUGIN_TOML)),
    ];
    files.extend(
        wit_files()
            .into_iter()
            .map(|(path, text)| (Path::new("wit").join(path), text)),
    );
    let workspace = Workspace::parse()?;
    for (path, text) in lang.files() {
        let mut text = fill(text);
        if lang == Lang::Rust && *path == "Cargo.toml" {
            text = text
                .replace("{{edition}}", &workspace.package("edition")?)
                .replace("{{rust_version}}", &workspace.package("rust-version")?)
                .replace(
                    "{{deps}}",
                    &workspace.dependencies(&["serde", "serde_json", "schemars"])?,
                );
        }
        files.push((PathBuf::from(path), text));
    }
    if lang == Lang::Rust {
        files.push((
            PathBuf::from("corral-sdk/Cargo.toml"),
            sdk_manifest(&workspace)?,
        ));
        for (file, text) in SDK_SOURCES {
            files.push((Path::new("corral-sdk/src").join(file), (*text).to_owned()));
        }
    }
    Ok(files)
}

/// The embedded workspace manifest, for the versions the SDK is built with.
struct Workspace {
    package: toml::Table,
    dependencies: toml::Table,
}

impl Workspace {
    fn parse() -> Result<Self, String> {
        let table: toml::Table = WORKSPACE_MANIFEST
            .parse()
            .map_err(|e| format!("the embedded workspace manifest does not parse: {e}"))?;
        let section = |key: &str| {
            table
                .get("workspace")
                .and_then(|w| w.get(key))
                .and_then(toml::Value::as_table)
                .cloned()
                .ok_or_else(|| format!("the embedded workspace manifest has no [workspace.{key}]"))
        };
        Ok(Self {
            package: section("package")?,
            dependencies: section("dependencies")?,
        })
    }

    fn package(&self, key: &str) -> Result<String, String> {
        self.package
            .get(key)
            .and_then(toml::Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| {
                format!("the embedded workspace manifest has no workspace.package.{key}")
            })
    }

    /// `name = spec` lines for `names`, with the workspace's specs.
    fn dependencies<S: AsRef<str>>(&self, names: &[S]) -> Result<String, String> {
        let mut lines = String::new();
        for name in names {
            let name = name.as_ref();
            let spec = self.dependencies.get(name).ok_or_else(|| {
                format!("the embedded workspace manifest has no dependency `{name}`")
            })?;
            lines.push_str(&format!("{name} = {spec}\n"));
        }
        Ok(lines)
    }
}

/// A standalone manifest for the SDK: its dependencies with the versions and
/// features the workspace builds it with.
fn sdk_manifest(workspace: &Workspace) -> Result<String, String> {
    let sdk: toml::Table = SDK_MANIFEST
        .parse()
        .map_err(|e| format!("the embedded SDK manifest does not parse: {e}"))?;
    let names = |key: &str| -> Vec<String> {
        sdk.get(key)
            .and_then(toml::Value::as_table)
            .map(|t| t.keys().cloned().collect())
            .unwrap_or_default()
    };
    let description = sdk
        .get("package")
        .and_then(|p| p.get("description"))
        .and_then(toml::Value::as_str)
        .unwrap_or("The corral plugin SDK");
    let deps = names("dependencies");
    let dev = names("dev-dependencies");
    Ok(format!(
        "# The corral SDK, as `corral plugin new` wrote it, with the dependency\n\
         # versions corral builds it with.\n\
         [package]\n\
         name = \"corral-sdk\"\n\
         description = {description:?}\n\
         version = {version:?}\n\
         edition = {edition:?}\n\
         rust-version = {rust:?}\n\
         license = {license:?}\n\
         publish = false\n\
         \n\
         [dependencies]\n\
         {deps}\
         \n\
         [dev-dependencies]\n\
         {dev}",
        version = workspace.package("version")?,
        edition = workspace.package("edition")?,
        rust = workspace.package("rust-version")?,
        license = workspace.package("license")?,
        deps = workspace.dependencies(&deps)?,
        dev = workspace.dependencies(&dev)?,
    ))
}

/// Writes `files` under `dir`, creating directories as needed.
fn write_all(dir: &Path, files: &[(PathBuf, String)]) -> Result<(), String> {
    for (rel, text) in files {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        }
        std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sdk_manifest_takes_the_workspace_versions() {
        let text = sdk_manifest(&Workspace::parse().expect("workspace")).expect("manifest");
        let parsed: toml::Table = text.parse().expect("valid TOML");
        let ws: toml::Table = WORKSPACE_MANIFEST.parse().expect("workspace");
        for (name, spec) in parsed["dependencies"].as_table().expect("deps") {
            assert_eq!(
                Some(spec),
                ws["workspace"]["dependencies"].get(name),
                "{name}"
            );
        }
        assert!(
            parsed["dependencies"].get("wit-bindgen").is_some(),
            "{text}"
        );
    }

    #[test]
    fn names_follow_the_manifest_rule() {
        assert!(valid_name("my-tool_2"));
        for bad in ["", "2x", "My", "a b", "a/b", "../x"] {
            assert!(!valid_name(bad), "{bad}");
        }
    }
}
