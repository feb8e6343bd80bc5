//! What the command line and the environment change in the manifest's
//! layers before they are checked: a profile (`--profile NAME`, a
//! `[profiles.NAME]` table of the user's file), `-c key=value` overrides, and
//! the base URL the OpenAI and Anthropic SDKs read from `OPENAI_BASE_URL` and
//! `ANTHROPIC_BASE_URL`.
//!
//! Decisions, as Codex makes them for `-c` and the SDKs for their variables:
//! - a key is a dotted manifest path (`agent.max_iterations`,
//!   `plugins.openai.config.model`); the short keys `provider`, `model`,
//!   `mode` and `max_iterations` name `agent.provider`, `agent.model`,
//!   `policy.mode` and `agent.max_iterations`, and `providers.NAME.KEY` names
//!   `plugins.NAME.config.KEY`. A value is TOML (`-c max_iterations=3`,
//!   `-c 'plugins.x.grants.net=["http://127.0.0.1:8080"]'`), else a string.
//! - the profile applies first, then each `-c` in order; both win over every
//!   file, since the user typed them for this run.
//! - a plugin key changes the entry of the layer that declares the plugin, so
//!   the rest of the entry (source, grants) stays as that layer wrote it.
//! - the base-URL variables are defaults: they apply where no file of the
//!   user or the project sets the provider's `base_url`, and they never widen
//!   `grants.net`; a URL whose origin is not granted makes the provider
//!   refuse to start, saying how to grant it ([`crate::Manifest::provider_errors`]).

use super::raw::Layer;
use super::{DEFAULTS_NAME, ManifestError};

/// A profile and `-c` overrides, as the command line gave them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overrides {
    /// `--profile NAME`.
    pub profile: Option<String>,
    /// Each `-c key=value`, in order.
    pub settings: Vec<String>,
}

/// The name the changed settings go by in messages.
pub const OVERRIDES_NAME: &str = "--profile/-c overrides";

/// What the fix of a bad key says.
const KEYS_HELP: &str = "a key is a manifest path such as model, provider, mode, max_iterations, \
     agent.temperature, providers.openai.base_url or plugins.NAME.config.KEY, and a value is \
     TOML or plain text: -c model=gpt-4.1, -c max_iterations=5";

/// A base URL an SDK variable gave a provider, kept for the grant check.
#[derive(Debug, Clone)]
pub(crate) struct EnvBaseUrl {
    pub(crate) plugin: String,
    pub(crate) var: &'static str,
    pub(crate) url: String,
}

/// The provider plugins whose SDKs read a base-URL variable: its name, and
/// what corral's `base_url` adds to the SDK's (Anthropic's SDK appends `/v1`
/// itself).
const ENV_BASE_URLS: [(&str, &str, &str); 2] = [
    ("builtin:openai", "OPENAI_BASE_URL", ""),
    ("builtin:anthropic", "ANTHROPIC_BASE_URL", "/v1"),
];

fn bad(name: &str, message: String, help: Option<String>) -> ManifestError {
    ManifestError {
        file: name.to_owned(),
        line: 0,
        column: 0,
        message,
        help,
    }
}

/// A layer's text as a table (it is parsed strictly again later).
fn parse(layer: &Layer) -> Result<toml::Table, ManifestError> {
    layer.text.parse::<toml::Table>().map_err(|e| {
        // Located as the strict parse locates its errors: the user fixes a
        // line, not a file.
        let (line, column) = e
            .span()
            .map_or((0, 0), |s| super::error::line_col(&layer.text, s.start));
        ManifestError {
            line,
            column,
            ..bad(
                &layer.name,
                e.message().trim().to_owned(),
                Some("fix the TOML of this file".into()),
            )
        }
    })
}

fn store(layer: &mut Layer, table: &toml::Table) -> Result<(), ManifestError> {
    layer.text = toml::to_string(table).map_err(|e| {
        bad(
            &layer.name,
            format!("cannot write the overridden settings back: {e}"),
            None,
        )
    })?;
    Ok(())
}

/// The index of the last layer that declares `[plugins.NAME]`, with its table.
fn declaring(tables: &[toml::Table], name: &str) -> Option<usize> {
    tables.iter().rposition(|t| {
        t.get("plugins")
            .and_then(|p| p.get(name))
            .is_some_and(|e| e.get("enabled").and_then(toml::Value::as_bool) != Some(false))
    })
}

/// Applies the SDK base-URL variables, the profile and the `-c` overrides to
/// `layers` (the user's file is the layer named by `user_file`). Returns the
/// base URLs taken from the environment.
pub(crate) fn apply(
    layers: &mut Vec<Layer>,
    user_file: Option<&str>,
    overrides: &Overrides,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<EnvBaseUrl>, ManifestError> {
    let mut tables = layers.iter().map(parse).collect::<Result<Vec<_>, _>>()?;
    let mut changed = vec![false; layers.len()];
    let from_env = env_base_urls(layers, &mut tables, &mut changed, env);
    let mut settings: Vec<(String, Vec<String>, toml::Value)> = Vec::new();
    if let Some(name) = &overrides.profile {
        settings.extend(profile(layers, &tables, user_file, name)?);
    }
    for text in &overrides.settings {
        let (path, value) = setting(text)?;
        settings.push((format!("-c {text}"), path, value));
    }
    let mut overlay = toml::Table::new();
    for (shown, path, value) in settings {
        check_alone(&shown, &path, &value)?;
        let target = if path[0] == "plugins" {
            let Some(at) = declaring(&tables, &path[1]) else {
                return Err(bad(
                    OVERRIDES_NAME,
                    format!("`{shown}`: no layer declares the plugin `{}`", path[1]),
                    Some(format!(
                        "declare [plugins.{}] with its source in corral.toml first",
                        path[1]
                    )),
                ));
            };
            changed[at] = true;
            &mut tables[at]
        } else {
            &mut overlay
        };
        set(target, &path, value);
    }
    for (i, layer) in layers.iter_mut().enumerate() {
        if changed[i] {
            store(layer, &tables[i])?;
        }
    }
    if !overlay.is_empty() {
        let mut layer = Layer {
            name: OVERRIDES_NAME.to_owned(),
            text: String::new(),
            base: layers.last().map(|l| l.base.clone()).unwrap_or_default(),
        };
        store(&mut layer, &overlay)?;
        layers.push(layer);
    }
    Ok(from_env)
}

/// Sets `base_url` from an SDK variable in the entries of providers whose
/// files leave it unset (the built-in defaults' value counts as unset).
fn env_base_urls(
    layers: &[Layer],
    tables: &mut [toml::Table],
    changed: &mut [bool],
    env: &dyn Fn(&str) -> Option<String>,
) -> Vec<EnvBaseUrl> {
    let mut out = Vec::new();
    let names: Vec<String> = tables
        .iter()
        .filter_map(|t| t.get("plugins").and_then(toml::Value::as_table))
        .flat_map(|p| p.keys().cloned())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    for name in names {
        let Some(at) = declaring(tables, &name) else {
            continue;
        };
        let is_default = layers[at].name == DEFAULTS_NAME;
        let Some(entry) = tables[at]
            .get_mut("plugins")
            .and_then(|p| p.get_mut(&name))
            .and_then(toml::Value::as_table_mut)
        else {
            continue;
        };
        let source = entry.get("source").and_then(toml::Value::as_str);
        let Some((_, var, suffix)) = ENV_BASE_URLS.iter().find(|(s, _, _)| Some(*s) == source)
        else {
            continue;
        };
        let Some(url) = env(var).filter(|u| !u.trim().is_empty()) else {
            continue;
        };
        let config = entry
            .entry("config")
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        let Some(config) = config.as_table_mut() else {
            continue;
        };
        if config.contains_key("base_url") && !is_default {
            continue;
        }
        let url = format!("{}{suffix}", url.trim().trim_end_matches('/'));
        config.insert("base_url".into(), toml::Value::String(url.clone()));
        changed[at] = true;
        out.push(EnvBaseUrl {
            plugin: name,
            var,
            url,
        });
    }
    out
}

/// The settings of `[profiles.NAME]` in the user's file.
fn profile(
    layers: &[Layer],
    tables: &[toml::Table],
    user_file: Option<&str>,
    name: &str,
) -> Result<Vec<(String, Vec<String>, toml::Value)>, ManifestError> {
    let user = user_file.and_then(|f| layers.iter().position(|l| l.name == f));
    let profiles = user
        .and_then(|i| tables[i].get("profiles"))
        .and_then(toml::Value::as_table);
    let Some(table) = profiles
        .and_then(|p| p.get(name))
        .and_then(toml::Value::as_table)
    else {
        let known: Vec<&str> = profiles
            .map(|p| p.keys().map(String::as_str).collect())
            .unwrap_or_default();
        return Err(bad(
            OVERRIDES_NAME,
            format!(
                "--profile {name}: your config ({}) has no [profiles.{name}]",
                user_file.unwrap_or("none found")
            ),
            Some(if known.is_empty() {
                format!(
                    "add one, e.g. [profiles.{name}] provider = \"openai\", model = \"gpt-4.1\", mode = \"auto-edit\""
                )
            } else {
                format!("the profiles there are: {}", known.join(", "))
            }),
        ));
    };
    let mut out = Vec::new();
    let mut leaves = Vec::new();
    flatten(table, &mut Vec::new(), &mut leaves);
    for (path, value) in leaves {
        let shown = format!("[profiles.{name}] {}", path.join("."));
        out.push((shown, expand(path), value));
    }
    Ok(out)
}

/// Every value of `table` that is not a table, with its path.
fn flatten(
    table: &toml::Table,
    prefix: &mut Vec<String>,
    out: &mut Vec<(Vec<String>, toml::Value)>,
) {
    for (k, v) in table {
        prefix.push(k.clone());
        match v.as_table() {
            Some(t) if !t.is_empty() => flatten(t, prefix, out),
            _ => out.push((prefix.clone(), v.clone())),
        }
        prefix.pop();
    }
}

/// The short keys spelled out.
fn expand(path: Vec<String>) -> Vec<String> {
    let p: Vec<&str> = path.iter().map(String::as_str).collect();
    let full: Vec<&str> = match p.as_slice() {
        ["provider"] => vec!["agent", "provider"],
        ["model"] => vec!["agent", "model"],
        ["max_iterations"] => vec!["agent", "max_iterations"],
        ["mode"] => vec!["policy", "mode"],
        ["providers", name, rest @ ..] if !rest.is_empty() => {
            let mut v = vec!["plugins", *name, "config"];
            v.extend_from_slice(rest);
            v
        }
        _ => return path,
    };
    full.into_iter().map(str::to_owned).collect()
}

/// `key=value` as a path and a TOML value.
fn setting(text: &str) -> Result<(Vec<String>, toml::Value), ManifestError> {
    let Some((key, value)) = text.split_once('=') else {
        return Err(bad(
            OVERRIDES_NAME,
            format!("`-c {text}` has no `=`"),
            Some(format!("write -c key=value; {KEYS_HELP}")),
        ));
    };
    let key = key.trim();
    let path = key_path(key).ok_or_else(|| {
        bad(
            OVERRIDES_NAME,
            format!("`-c {text}`: `{key}` is not a key"),
            Some(KEYS_HELP.into()),
        )
    })?;
    let value = value.trim();
    let parsed = format!("v = {value}")
        .parse::<toml::Table>()
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(value.to_owned()));
    Ok((expand(path), parsed))
}

/// A dotted key (TOML's quoting allowed: `agent.models."gpt-4.1".price`) as
/// its parts.
fn key_path(key: &str) -> Option<Vec<String>> {
    let mut table = format!("{key} = 0").parse::<toml::Table>().ok()?;
    let mut path = Vec::new();
    loop {
        if table.len() != 1 {
            return None;
        }
        let (k, v) = table.into_iter().next()?;
        path.push(k);
        match v {
            toml::Value::Table(t) => table = t,
            _ => return Some(path),
        }
    }
}

/// Refuses a setting that the manifest's schema refuses, naming it: the
/// setting is checked alone, in a table of its own.
fn check_alone(shown: &str, path: &[String], value: &toml::Value) -> Result<(), ManifestError> {
    if path.len() == 2 && path[0] == "plugins" {
        return Err(bad(
            OVERRIDES_NAME,
            format!("`{shown}` replaces a whole plugin entry"),
            Some("set one of its keys, e.g. plugins.NAME.config.model=...".into()),
        ));
    }
    let mut table = toml::Table::new();
    set(&mut table, path, value.clone());
    let text = toml::to_string(&table).unwrap_or_default();
    super::raw::check_text(&text).map_err(|e| {
        bad(
            OVERRIDES_NAME,
            format!("`{shown}`: {}", e.message().trim()),
            Some(KEYS_HELP.into()),
        )
    })
}

/// Sets `path` in `table` to `value`, making the tables on the way.
fn set(table: &mut toml::Table, path: &[String], value: toml::Value) {
    let Some((last, init)) = path.split_last() else {
        return;
    };
    let mut at = table;
    for key in init {
        let slot = at
            .entry(key.clone())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        if !slot.is_table() {
            *slot = toml::Value::Table(toml::Table::new());
        }
        let toml::Value::Table(t) = slot else { return };
        at = t;
    }
    at.insert(last.clone(), value);
}

/// The message for a provider whose base URL came from `env` but whose
/// grants do not reach it, if they do not; it names `user_file` as the
/// place to grant it.
pub(crate) fn ungranted(
    env: &EnvBaseUrl,
    decl: &super::PluginDecl,
    user_file: Option<&str>,
) -> Option<String> {
    if decl.config.get("base_url") != Some(&env.url) {
        return None;
    }
    let after = env.url.split_once("://").map_or("", |(_, r)| r);
    let end = after.find('/').unwrap_or(after.len());
    let scheme_len = env.url.len() - after.len();
    let origin = &env.url[..scheme_len + end];
    let granted = match super::origin::split_origin(origin) {
        Ok((scheme, host, port)) => decl.net.iter().any(|g| g.allows(&scheme, &host, port)),
        Err(_) => false,
    };
    if granted {
        return None;
    }
    let name = &decl.name;
    // The entry in the user's file replaces the built-in one whole, so the
    // snippet carries everything the provider needs to start: a model, and
    // the key's header bound to the new origin (a key for the old one is
    // never sent elsewhere on its own).
    let mut snippet = format!(
        "[plugins.{name}]\n    source = \"{}\"\n    grants.net = [\"{origin}\"]\n",
        decl.source
    );
    if let Some(key) = decl.secrets.first() {
        snippet.push_str(&format!(
            "    grants.secrets = [{{ origin = \"{origin}\", header = \"{}\", value = \"{}\" }}]\n",
            key.header, key.value
        ));
    }
    let model = decl.config.get("model").map_or("MODEL", String::as_str);
    snippet.push_str(&format!("    config = {{ model = \"{model}\" }}\n"));
    Some(format!(
        "{var} is {url}, but the plugin `{name}` may not reach {origin}: corral does not widen \
         a plugin's grants.net on its own.\n  To use that server, add this to {file} (set the \
         model your server serves; drop grants.secrets if it needs no key):\n    {snippet}  \
         or unset {var}",
        var = env.var,
        url = env.url,
        file = user_file.unwrap_or("your corral.toml"),
    ))
}

/// The environment as the SDKs read it.
pub(crate) fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_keys_and_quoted_paths_expand() {
        let (p, v) = setting("model=gpt-4.1").unwrap();
        assert_eq!(p, ["agent", "model"]);
        assert_eq!(v, toml::Value::String("gpt-4.1".into()));
        let (p, v) = setting("providers.openai.base_url=http://x:1/v1").unwrap();
        assert_eq!(p, ["plugins", "openai", "config", "base_url"]);
        assert_eq!(v.as_str(), Some("http://x:1/v1"));
        let (p, v) = setting("agent.models.\"gpt-4.1\".context_window=9000").unwrap();
        assert_eq!(p, ["agent", "models", "gpt-4.1", "context_window"]);
        assert_eq!(v.as_integer(), Some(9000));
        assert!(setting("model").is_err());
    }
}
