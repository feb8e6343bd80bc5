//! # corral-sdk: write a corral tool plugin in Rust
//!
//! A corral tool plugin is a WebAssembly component (WASI 0.2) that exports the
//! `corral:plugin/tool` interface. This crate hides the component-model
//! plumbing: you write an argument struct, implement [`Tool`] for a type, and
//! call [`tools!`] once. The SDK generates the JSON Schema of your arguments,
//! parses and checks each call's JSON against your type, and turns your errors
//! into tool errors the model can read.
//!
//! ```no_run
//! use corral_sdk::{Effect, Output, Result, Tool, tools};
//! use schemars::JsonSchema;
//! use serde::Deserialize;
//!
//! /// Arguments of `word_count`.
//! #[derive(Deserialize, JsonSchema)]
//! #[serde(deny_unknown_fields)]
//! struct Args {
//!     /// File to count, relative to the workspace root.
//!     path: String,
//! }
//!
//! struct WordCount;
//!
//! impl Tool for WordCount {
//!     type Args = Args;
//!     const NAME: &'static str = "word_count";
//!     const DESCRIPTION: &'static str = "Counts the words in a file.";
//!     const EFFECTS: &'static [Effect] = &[Effect::Read];
//!
//!     fn run(args: Args) -> Result<Output> {
//!         let text = std::fs::read_to_string(&args.path)
//!             .map_err(|e| format!("cannot read `{}`: {e}", args.path))?;
//!         Ok(Output::text(text.split_whitespace().count().to_string()))
//!     }
//! }
//!
//! tools!(WordCount);
//! ```
//!
//! Build it with `cargo build --release --target wasm32-wasip2` from a crate
//! with `crate-type = ["cdylib"]`; the `.wasm` file in
//! `target/wasm32-wasip2/release/` is the plugin. The example above is built
//! in CI as `plugins/example`.
//!
//! ## Other kinds of plugins
//!
//! - [`mod@provider`]: an LLM provider adapter (implement `Provider`, call
//!   `provider!`), with [`http`] for outbound requests through `wasi:http`
//!   (the host adds credentials on egress) and [`sse`] for streamed answers.
//! - [`mod@hook`]: a hook that runs at points of a session (before a tool
//!   call, after it, at a prompt, ...) and answers with a decision
//!   (implement `Hook`, call `hook!`).
//! - [`process`]: run a program through the host, for plugins granted
//!   `grants.exec` in the manifest, from tools that declare
//!   [`Effect::Execute`].
//!
//! ## What a plugin sees
//!
//! Paths are relative to the workspace root, which is the plugin's current
//! directory when its manifest grants it (`grants.fs`). Without grants, a
//! plugin has no files, no environment, no network and no stdio; its
//! `stderr` goes to the host log. Use [`log`] for diagnostics and [`config`]
//! for the plugin's settings from the manifest.
#![deny(missing_docs)]

use schemars::JsonSchema;
use serde::de::DeserializeOwned;

pub mod cassette;
pub mod files;
pub mod hook;
pub mod http;
pub mod process;
pub mod provider;
pub mod sse;
#[cfg(feature = "testing")]
pub mod testing;

#[doc(hidden)]
pub mod __bindings {
    wit_bindgen::generate!({
        path: "../wit",
        world: "tool-plugin",
        pub_export_macro: true,
        export_macro_name: "__export_tool_plugin",
        default_bindings_module: "corral_sdk::__bindings",
    });
}

use __bindings::corral::plugin::host;
use __bindings::exports::corral::plugin::tool as wit;

/// Result type of a tool's [`Tool::run`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What a tool may do to the world. Declare every effect your tool can have:
/// the host's permission policy judges each call by them, and the host holds
/// the call to them: directories are writable only with [`Effect::Write`],
/// [`process`] runs programs only with [`Effect::Execute`], and requests
/// leave only with [`Effect::Network`], whatever the plugin's grants allow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Reads files or other local state.
    Read,
    /// Creates, changes or deletes files.
    Write,
    /// Runs programs through the host.
    Execute,
    /// Talks to the network.
    Network,
}

/// The successful result of a tool call.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Output {
    /// Text for the model.
    pub content: String,
    /// Marks the outcome as a failure the model should see while still
    /// returning content (prefer returning [`Error::Failed`]).
    pub is_error: bool,
    /// Optional structured data for UIs and scripts.
    pub data: Option<serde_json::Value>,
}

impl Output {
    /// Plain text output.
    pub fn text(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            ..Self::default()
        }
    }

    /// Attaches structured data.
    #[must_use]
    pub fn with_data(mut self, data: serde_json::Value) -> Self {
        self.data = Some(data);
        self
    }
}

impl From<String> for Output {
    fn from(content: String) -> Self {
        Self::text(content)
    }
}

/// Why a tool call failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// The arguments made no sense (beyond what the schema checks).
    InvalidArguments(String),
    /// The call failed; the model sees the message and may try again.
    Failed(String),
    /// The call failed in a way that should stop the agent's run.
    Fatal(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::InvalidArguments(m) => write!(f, "invalid arguments: {m}"),
            Error::Failed(m) | Error::Fatal(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for Error {}

impl From<String> for Error {
    fn from(message: String) -> Self {
        Error::Failed(message)
    }
}

impl From<&str> for Error {
    fn from(message: &str) -> Self {
        Error::Failed(message.to_owned())
    }
}

impl From<std::io::Error> for Error {
    fn from(err: std::io::Error) -> Self {
        Error::Failed(err.to_string())
    }
}

/// One tool. Implement it for a unit struct and list the struct in [`tools!`].
pub trait Tool {
    /// The arguments, parsed from the model's JSON. Derive `Deserialize` and
    /// `JsonSchema`; doc comments on fields become schema descriptions.
    type Args: DeserializeOwned + JsonSchema;
    /// The tool's name, unique across all loaded plugins (`snake_case`).
    const NAME: &'static str;
    /// What the tool does, written for the model.
    const DESCRIPTION: &'static str;
    /// Every effect the tool can have.
    const EFFECTS: &'static [Effect];

    /// Runs one call.
    fn run(args: Self::Args) -> Result<Output>;

    /// Shows what [`Tool::run`] would change, without changing anything: the
    /// unified diff the same call would make to files (`--- a/PATH`,
    /// `+++ b/PATH`, `@@` hunks with 3 lines of context, `/dev/null` for a
    /// created or deleted file), or `None` if the tool changes no file.
    ///
    /// The host calls it before asking the user to approve a write, with the
    /// plugin's directories mounted read-only, no programs and no network.
    /// Override it in every tool that declares [`Effect::Write`], and compute
    /// the new content with the same code `run` uses so the preview cannot
    /// disagree with what happens.
    /// Return an empty string when the call would leave every file as it is.
    fn preview(args: Self::Args) -> Result<Option<String>> {
        // Tools that change no file have nothing to show.
        let _ = args;
        Ok(None)
    }
}

/// Severity of a [`log`] line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    /// Very detailed tracing.
    Trace,
    /// Debugging detail.
    Debug,
    /// Normal operation.
    Info,
    /// Something unexpected but handled.
    Warn,
    /// A failure.
    Error,
}

/// Writes a line to the host's log under this plugin's name.
pub fn log(level: Level, message: &str) {
    let level = match level {
        Level::Trace => host::LogLevel::Trace,
        Level::Debug => host::LogLevel::Debug,
        Level::Info => host::LogLevel::Info,
        Level::Warn => host::LogLevel::Warn,
        Level::Error => host::LogLevel::Error,
    };
    host::log(level, message);
}

/// Reads one of this plugin's settings (`[plugins.NAME.config]` in the
/// manifest). Tables and arrays come back as JSON text.
pub fn config(key: &str) -> Option<String> {
    host::config(key)
}

/// Checks a path argument the way every first-party tool does: it must be
/// relative to the workspace root and must not climb out of it with `..`.
/// Returns the normalised relative path (`.` for the root).
///
/// The sandbox enforces the same thing (and catches symlinks); checking first
/// gives the model a clearer message.
pub fn workspace_path(path: &str) -> Result<std::path::PathBuf> {
    use std::path::{Component, Path, PathBuf};
    let raw = Path::new(path);
    if raw.is_absolute() || path.starts_with('/') || path.starts_with('\\') {
        return Err(Error::InvalidArguments(format!(
            "`{path}` is an absolute path; tool paths are relative to the workspace root (e.g. `src/main.rs`)"
        )));
    }
    let mut out = PathBuf::new();
    for part in raw.components() {
        match part {
            Component::Normal(p) => out.push(p),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return Err(Error::InvalidArguments(format!(
                        "`{path}` leads out of the workspace; tool paths stay inside the workspace root"
                    )));
                }
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(Error::InvalidArguments(format!(
                    "`{path}` is an absolute path; tool paths are relative to the workspace root"
                )));
            }
        }
    }
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    Ok(out)
}

/// Turns an I/O error on a workspace path into a message for the model,
/// explaining sandbox refusals.
pub fn io_error(path: &str, err: &std::io::Error) -> Error {
    use std::io::ErrorKind;
    match err.kind() {
        ErrorKind::NotFound => Error::Failed(format!("`{path}` does not exist")),
        ErrorKind::PermissionDenied => Error::Failed(format!(
            "`{path}` is outside what this plugin may access here (a symlink or path leading out of its grant, a read-only grant, \
             or a path the host protects: .git, which only the git tools change, and corral.toml)"
        )),
        ErrorKind::Unsupported => Error::Failed(format!(
            "`{path}` cannot be opened: it is not a regular file or directory (a FIFO, socket or device), or the operation is not supported"
        )),
        ErrorKind::AlreadyExists => Error::Failed(format!("`{path}` already exists")),
        _ => Error::Failed(format!("`{path}`: {err}")),
    }
}

/// The JSON Schema of a tool's arguments, as the host and the model see it.
pub fn schema_of<T: Tool>() -> serde_json::Value {
    let mut schema = serde_json::to_value(schemars::schema_for!(T::Args))
        .unwrap_or_else(|_| serde_json::json!({ "type": "object" }));
    if let Some(obj) = schema.as_object_mut() {
        // The title is the Rust type name, which means nothing to a model.
        obj.remove("title");
    }
    schema
}

#[doc(hidden)]
pub mod __private {
    use super::*;

    /// `text` as a byte array of its length, for [`requests!`](crate::requests).
    pub const fn bytes<const N: usize>(text: &str) -> [u8; N] {
        let b = text.as_bytes();
        let mut out = [0u8; N];
        let mut i = 0;
        while i < N {
            out[i] = b[i];
            i += 1;
        }
        out
    }

    /// A type-erased tool, built by [`tools!`](crate::tools).
    pub struct Entry {
        pub spec: fn() -> wit::ToolSpec,
        pub name: &'static str,
        pub invoke: fn(&str) -> std::result::Result<wit::ToolOutput, wit::ToolError>,
        pub preview: fn(&str) -> std::result::Result<Option<String>, wit::ToolError>,
    }

    pub const fn entry<T: Tool>() -> Entry {
        Entry {
            spec: spec::<T>,
            name: T::NAME,
            invoke: invoke_one::<T>,
            preview: preview_one::<T>,
        }
    }

    fn spec<T: Tool>() -> wit::ToolSpec {
        wit::ToolSpec {
            name: T::NAME.to_owned(),
            description: T::DESCRIPTION.to_owned(),
            input_schema: schema_of::<T>().to_string(),
            effects: T::EFFECTS
                .iter()
                .map(|e| match e {
                    Effect::Read => __bindings::corral::plugin::types::Effect::Read,
                    Effect::Write => __bindings::corral::plugin::types::Effect::Write,
                    Effect::Execute => __bindings::corral::plugin::types::Effect::Execute,
                    Effect::Network => __bindings::corral::plugin::types::Effect::Network,
                })
                .collect(),
        }
    }

    fn parse_args<T: Tool>(arguments: &str) -> std::result::Result<T::Args, wit::ToolError> {
        serde_json::from_str(arguments).map_err(|e| {
            wit::ToolError::InvalidArguments(format!("arguments for `{}`: {e}", T::NAME))
        })
    }

    fn tool_error(err: Error) -> wit::ToolError {
        match err {
            Error::InvalidArguments(m) => wit::ToolError::InvalidArguments(m),
            Error::Failed(m) => wit::ToolError::Failed(m),
            Error::Fatal(m) => wit::ToolError::Fatal(m),
        }
    }

    fn invoke_one<T: Tool>(
        arguments: &str,
    ) -> std::result::Result<wit::ToolOutput, wit::ToolError> {
        let out = T::run(parse_args::<T>(arguments)?).map_err(tool_error)?;
        Ok(wit::ToolOutput {
            content: out.content,
            is_error: out.is_error,
            data: out.data.map(|d| d.to_string()),
        })
    }

    fn preview_one<T: Tool>(
        arguments: &str,
    ) -> std::result::Result<Option<String>, wit::ToolError> {
        T::preview(parse_args::<T>(arguments)?).map_err(tool_error)
    }

    pub fn describe(tools: &[Entry]) -> Vec<wit::ToolSpec> {
        tools.iter().map(|t| (t.spec)()).collect()
    }

    pub fn invoke(
        tools: &[Entry],
        call: wit::ToolCall,
    ) -> std::result::Result<wit::ToolOutput, wit::ToolError> {
        (find(tools, &call.name)?.invoke)(&call.arguments)
    }

    pub fn preview(
        tools: &[Entry],
        call: wit::ToolCall,
    ) -> std::result::Result<Option<String>, wit::ToolError> {
        (find(tools, &call.name)?.preview)(&call.arguments)
    }

    fn find<'a>(tools: &'a [Entry], name: &str) -> std::result::Result<&'a Entry, wit::ToolError> {
        tools.iter().find(|t| t.name == name).ok_or_else(|| {
            wit::ToolError::UnknownTool(format!("this plugin has no tool named `{name}`"))
        })
    }

    pub use crate::__bindings::exports::corral::plugin::tool::{
        Guest, ToolCall, ToolError, ToolOutput, ToolSpec,
    };
}

/// Exports the listed [`Tool`] types as this component's tools. Call it once,
/// at the crate root of a `cdylib` built for `wasm32-wasip2`.
///
/// ```text
/// corral_sdk::tools!(ReadFile, WriteFile);
/// ```
#[macro_export]
macro_rules! tools {
    ($($tool:ty),+ $(,)?) => {
        #[doc(hidden)]
        #[allow(dead_code, reason = "only exported when built for wasm")]
        struct __CorralTools;

        #[doc(hidden)]
        #[allow(dead_code, reason = "only exported when built for wasm")]
        const __CORRAL_TOOLS: &[$crate::__private::Entry] =
            &[$($crate::__private::entry::<$tool>()),+];

        impl $crate::__private::Guest for __CorralTools {
            fn describe() -> ::std::vec::Vec<$crate::__private::ToolSpec> {
                $crate::__private::describe(__CORRAL_TOOLS)
            }
            fn invoke(
                call: $crate::__private::ToolCall,
            ) -> ::std::result::Result<$crate::__private::ToolOutput, $crate::__private::ToolError> {
                $crate::__private::invoke(__CORRAL_TOOLS, call)
            }
            fn preview(
                call: $crate::__private::ToolCall,
            ) -> ::std::result::Result<
                ::std::option::Option<::std::string::String>,
                $crate::__private::ToolError,
            > {
                $crate::__private::preview(__CORRAL_TOOLS, call)
            }
        }

        // Only a component exports the tool interface; a native build (tests,
        // benchmarks) links several plugins side by side.
        #[cfg(target_family = "wasm")]
        $crate::__bindings::__export_tool_plugin!(__CorralTools with_types_in $crate::__bindings);
    };
}

/// Embeds what the plugin requests (the text of its `corral-plugin.toml`) in
/// the component, as the custom section `corral-requests`, so the one
/// `.wasm` file carries it. `corral plugin add` shows the requests and
/// grants only what the user approves. Call it once, at the crate root.
///
/// ```text
/// corral_sdk::requests!(include_str!("../corral-plugin.toml"));
/// ```
///
/// The text has a `[plugin]` table (`name`, `version`, `description`) and a
/// `[requests]` table with the manifest's grant keys: `fs` (workspace
/// directories with `ro`/`rw`), `net`, `env`, `exec` and `secrets`.
#[macro_export]
macro_rules! requests {
    ($text:expr $(,)?) => {
        const _: () = {
            const TEXT: &str = $text;
            #[cfg(target_family = "wasm")]
            #[used]
            #[unsafe(link_section = "corral-requests")]
            static REQUESTS: [u8; TEXT.len()] = $crate::__private::bytes::<{ TEXT.len() }>(TEXT);
        };
    };
}

#[cfg(test)]
mod tests {
    use super::__private::{self, Entry, ToolCall, ToolError};
    use super::*;
    use pretty_assertions::assert_eq;

    #[derive(serde::Deserialize, JsonSchema)]
    struct EchoArgs {
        text: String,
    }

    /// Changes no file, so it keeps the default `preview`.
    struct Echo;

    impl Tool for Echo {
        type Args = EchoArgs;
        const NAME: &'static str = "echo";
        const DESCRIPTION: &'static str = "Echoes.";
        const EFFECTS: &'static [Effect] = &[];

        fn run(args: EchoArgs) -> Result<Output> {
            Ok(Output::text(args.text))
        }
    }

    /// Overrides `preview`, and fails it on demand.
    struct Writer;

    impl Tool for Writer {
        type Args = EchoArgs;
        const NAME: &'static str = "writer";
        const DESCRIPTION: &'static str = "Pretends to write.";
        const EFFECTS: &'static [Effect] = &[Effect::Write];

        fn run(args: EchoArgs) -> Result<Output> {
            Ok(Output::text(args.text))
        }

        fn preview(args: EchoArgs) -> Result<Option<String>> {
            match args.text.as_str() {
                "fail" => Err(Error::Failed("cannot preview".into())),
                text => Ok(Some(format!("+{text}\n"))),
            }
        }
    }

    const TOOLS: &[Entry] = &[__private::entry::<Echo>(), __private::entry::<Writer>()];

    /// The generated `ToolError` has no `PartialEq`; compare its kind and text.
    fn flat<T>(
        result: std::result::Result<T, ToolError>,
    ) -> std::result::Result<T, (&'static str, String)> {
        result.map_err(|e| match e {
            ToolError::InvalidArguments(m) => ("invalid-arguments", m),
            ToolError::UnknownTool(m) => ("unknown-tool", m),
            ToolError::Failed(m) => ("failed", m),
            ToolError::Fatal(m) => ("fatal", m),
        })
    }

    fn call(name: &str, arguments: &str) -> ToolCall {
        ToolCall {
            id: "call-1".into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }

    #[test]
    fn preview_defaults_to_none() {
        let got = __private::preview(TOOLS, call("echo", r#"{"text":"hi"}"#));
        assert_eq!(flat(got), Ok(None));
    }

    #[test]
    fn preview_reaches_the_tool_override() {
        let got = __private::preview(TOOLS, call("writer", r#"{"text":"hi"}"#));
        assert_eq!(flat(got), Ok(Some("+hi\n".to_owned())));
        let got = __private::preview(TOOLS, call("writer", r#"{"text":"fail"}"#));
        assert_eq!(flat(got), Err(("failed", "cannot preview".to_owned())));
    }

    #[test]
    fn preview_rejects_bad_arguments_like_invoke() {
        let preview = flat(__private::preview(TOOLS, call("writer", r#"{"txt":"hi"}"#)));
        let Err(("invalid-arguments", message)) = &preview else {
            panic!("expected invalid-arguments, got {preview:?}");
        };
        assert!(message.starts_with("arguments for `writer`: "), "{message}");
        let invoke = flat(__private::invoke(TOOLS, call("writer", r#"{"txt":"hi"}"#)));
        assert_eq!(invoke.err(), preview.err());
    }

    #[test]
    fn preview_of_an_unknown_tool() {
        let got = __private::preview(TOOLS, call("nope", "{}"));
        assert_eq!(
            flat(got),
            Err((
                "unknown-tool",
                "this plugin has no tool named `nope`".to_owned()
            ))
        );
    }
}
