//! Finding what a session needs: its directory, an existing log, and the
//! provider plugin chosen by flag, manifest or environment.

use crate::log::{list_heads, sessions_root, workspace_dir};
use crate::manifest::Manifest;
use crate::runtime::{Plugin, Plugins};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Why a session's directory or log could not be found; its text says
/// what to do.
#[derive(Debug, thiserror::Error)]
pub enum FindError {
    /// The workspace cannot be opened.
    #[error("the workspace {} cannot be opened: {why}", workspace.display())]
    Workspace {
        /// The workspace.
        workspace: PathBuf,
        /// The system's reason, in words.
        why: String,
    },
    /// There is no data directory to keep sessions in.
    #[error("no data directory (set XDG_DATA_HOME)")]
    NoDataDir,
    /// The sessions could not be listed.
    #[error("cannot list sessions: {0}")]
    Unlisted(String),
    /// The workspace has no session yet.
    #[error("this workspace has no sessions yet")]
    NoSessions,
    /// No session's id starts with the given one.
    #[error("no session `{0}` in this workspace; `corral sessions` lists them")]
    NoSuch(String),
    /// More than one session's id starts with the given one.
    #[error("`{id}` matches {count} sessions; give more of the id")]
    Ambiguous {
        /// The id given.
        id: String,
        /// How many sessions it matches.
        count: usize,
    },
}

impl From<FindError> for String {
    fn from(e: FindError) -> Self {
        e.to_string()
    }
}

/// The directory of `workspace`'s sessions.
pub fn sessions_dir(workspace: &Path) -> Result<PathBuf, FindError> {
    let ws = workspace.canonicalize().map_err(|e| FindError::Workspace {
        workspace: workspace.to_path_buf(),
        why: crate::words::io(&e),
    })?;
    let root = sessions_root().ok_or(FindError::NoDataDir)?;
    Ok(workspace_dir(&root, &ws))
}

/// The log of the session `id` (a unique prefix is enough), or of the most
/// recent one.
pub fn find_session(dir: &Path, id: Option<&str>) -> Result<PathBuf, FindError> {
    // Only ids and start times are needed: no log's tail is read.
    let all = list_heads(dir).map_err(|e| FindError::Unlisted(crate::words::io(&e)))?;
    // `--last` is the user's last session: a subagent's log, which starts
    // after its parent's, is reached by its id only.
    let Some(id) = id else {
        return all
            .iter()
            .rev()
            .find(|s| s.parent.is_none())
            .map(|s| s.path.clone())
            .ok_or(FindError::NoSessions);
    };
    let matches: Vec<_> = all.iter().filter(|s| s.id.starts_with(id)).collect();
    match matches.as_slice() {
        [one] => Ok(one.path.clone()),
        [] => Err(FindError::NoSuch(id.to_owned())),
        many => Err(FindError::Ambiguous {
            id: id.to_owned(),
            count: many.len(),
        }),
    }
}

/// Why no provider could be chosen for a session; its text says what to
/// do.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    /// None is named and no built-in one has its key set.
    #[error(
        "no model provider is configured.\n  \
        To use OpenAI: export OPENAI_API_KEY=...   (or Anthropic: export ANTHROPIC_API_KEY=...)\n  \
        To use another server (Ollama, vLLM, LM Studio...): in your config, {config}, \
        set [plugins.openai] config.base_url, grants.net and [agent] provider = \"openai\" \
        (or put them in a [profiles.NAME] there and pass --profile NAME)\n  \
        To try corral offline: corral run --provider replay \"What is this project?\""
    )]
    NotConfigured {
        /// The user's config file, as shown.
        config: String,
    },
    /// No plugin has the name asked for.
    #[error("there is no plugin `{name}`; provider plugins: {}", providers.join(", "))]
    NoPlugin {
        /// The name asked for.
        name: String,
        /// The provider plugins there are.
        providers: Vec<String>,
    },
    /// The plugin is a tool plugin.
    #[error("plugin `{0}` provides tools, not a model")]
    NotAProvider(String),
    /// The manifest's entry for it is wrong; the text says how.
    #[error("{0}")]
    Invalid(String),
    /// Its API key's variable is not set.
    #[error(
        "provider `{name}` needs the environment variable {var} (its API key); export it, \
         or try corral offline with --provider replay"
    )]
    NoKey {
        /// The provider.
        name: String,
        /// The variable.
        var: String,
    },
    /// A built-in HTTP provider has no model to ask for.
    #[error(
        "configuration error: provider `{name}` ({origin}) has no model to ask for: its config has no \
         `model`, and neither `[agent] model` nor `--model` names one. Add `model = \"{example}\"` \
         to the `config` of [plugins.{name}] (or set `[agent] model`, or pass `--model NAME`)"
    )]
    NoModel {
        /// The provider.
        name: String,
        /// Where its entry is, as shown.
        origin: String,
        /// A model to name.
        example: &'static str,
    },
}

impl From<ProviderError> for String {
    fn from(e: ProviderError) -> Self {
        e.to_string()
    }
}

/// Picks the provider: `wanted`, else `[agent] provider`, else the first
/// built-in provider whose key is set.
pub fn choose_provider(
    manifest: &Manifest,
    plugins: &Plugins,
    wanted: Option<&str>,
) -> Result<Arc<Plugin>, ProviderError> {
    let find = |name: &str| {
        plugins
            .plugins()
            .iter()
            .find(|p| p.decl().name == name)
            .cloned()
    };
    let name = match wanted
        .map(str::to_owned)
        .or_else(|| manifest.agent.provider.clone())
    {
        Some(n) => n,
        None => {
            let ready = ["openai", "anthropic"].into_iter().find(|n| {
                find(n).is_some_and(|p| p.decl().secrets.iter().all(|s| s.resolve().is_ok()))
            });
            match ready {
                Some(n) => n.to_owned(),
                None => {
                    // Named, so the user knows which file to open.
                    let config = crate::manifest::user_file().map_or_else(
                        || "your corral.toml".to_owned(),
                        |f| f.display().to_string(),
                    );
                    return Err(ProviderError::NotConfigured { config });
                }
            }
        }
    };
    let plugin = find(&name).ok_or_else(|| {
        let providers: Vec<String> = plugins
            .plugins()
            .iter()
            .filter(|p| p.is_provider())
            .map(|p| p.decl().name.clone())
            .collect();
        ProviderError::NoPlugin {
            name: name.clone(),
            providers,
        }
    })?;
    if !plugin.is_provider() {
        return Err(ProviderError::NotAProvider(name));
    }
    if let Some(why) = manifest.provider_errors.get(&name) {
        return Err(ProviderError::Invalid(why.clone()));
    }
    for secret in &plugin.decl().secrets {
        if let Err(var) = secret.resolve() {
            return Err(ProviderError::NoKey {
                name,
                var: var.to_string(),
            });
        }
    }
    Ok(plugin)
}

/// Refuses, as a configuration error, to start with a built-in HTTP
/// provider that has no model to ask for: neither `--model`, `[agent]
/// model` (`model`, empty when neither is set) nor its `config.model`
/// names one. Its first request would otherwise fail as a protocol error.
pub(super) fn check_model(provider: &Plugin, model: &str) -> Result<(), ProviderError> {
    let decl = provider.decl();
    let needs_one = matches!(
        &decl.source,
        crate::manifest::Source::Builtin(b) if b == "openai" || b == "anthropic"
    );
    let configured = decl
        .config
        .get("model")
        .is_some_and(|m| !m.trim().is_empty());
    if !needs_one || !model.trim().is_empty() || configured {
        return Ok(());
    }
    let name = &decl.name;
    let example = if decl.source == crate::manifest::Source::Builtin("anthropic".into()) {
        "claude-sonnet-4-5"
    } else {
        "gpt-4.1"
    };
    Err(ProviderError::NoModel {
        name: name.clone(),
        origin: decl.origin.to_string(),
        example,
    })
}
