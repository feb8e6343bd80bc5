//! An `after_tool` hook that runs the formatter on a Rust, JavaScript or
//! Python file after a tool wrote it, through a program granted in the
//! manifest, and tells the model what happened.
//!
//! ```toml
//! [plugins.format]
//! source = "builtin:hook-format"
//! grants.exec = [{ program = "rustfmt", args = ["--edition", "2024", "*"] }]
//!
//! [hooks]
//! after_tool = [{ plugin = "format", tools = ["write_file", "edit_file"] }]
//! ```
//!
//! The formatter of each extension can be changed with `config`, e.g.
//! `config = { py = ["black", "-q"] }`; the file's path is added last
//! (`./` before a path starting with `-`, so that it is never an option).
//! Defaults: `rs` → `rustfmt --edition 2024`, `js`/`ts`/`jsx`/`tsx`/`mjs` →
//! `prettier --write`, `py` → `ruff format`.

use corral_sdk::hook::{Decision, Event, Hook};
use corral_sdk::process::Command;

/// The default formatter of a file extension.
pub fn default_formatter(ext: &str) -> Option<&'static [&'static str]> {
    Some(match ext {
        "rs" => &["rustfmt", "--edition", "2024"],
        "js" | "jsx" | "ts" | "tsx" | "mjs" | "cjs" => &["prettier", "--write"],
        "py" => &["ruff", "format"],
        _ => return None,
    })
}

/// The path a tool call wrote, from its `path` argument.
pub fn written_path(args: &serde_json::Value) -> Option<&str> {
    args.get("path").and_then(|p| p.as_str())
}

/// The formatter command for `path`, with `config` (the value of
/// `config.<ext>`, a JSON list) overriding the default.
pub fn formatter(path: &str, config: Option<&str>) -> Result<Option<Vec<String>>, String> {
    let Some(ext) = path.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase()) else {
        return Ok(None);
    };
    let mut argv: Vec<String> = match config {
        Some(text) => serde_json::from_str(text)
            .map_err(|e| format!("config.{ext} must be a list of strings: {e}"))?,
        None => match default_formatter(&ext) {
            Some(argv) => argv.iter().map(|a| (*a).to_owned()).collect(),
            None => return Ok(None),
        },
    };
    if argv.is_empty() {
        return Ok(None);
    }
    // A name the model chose is a file, never an option: `--plugin=x.mjs`
    // would make prettier load the model's code.
    argv.push(if path.starts_with('-') {
        format!("./{path}")
    } else {
        path.to_owned()
    });
    Ok(Some(argv))
}

/// The hook exported by this component.
pub struct Format;

impl Hook for Format {
    fn handle(event: Event) -> Decision {
        let Event::AfterTool(after) = event else {
            return Decision::Continue;
        };
        if after.is_error {
            return Decision::Continue;
        }
        let args = corral_sdk::hook::arguments(&after.call);
        let Some(path) = written_path(&args) else {
            return Decision::Continue;
        };
        let ext = path.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
        let config = ext.and_then(|e| corral_sdk::config(&e));
        let argv = match formatter(path, config.as_deref()) {
            Ok(Some(argv)) => argv,
            Ok(None) => return Decision::Continue,
            Err(why) => return Decision::AddContext(why),
        };
        let shown = argv.join(" ");
        let report = match Command::new(&argv[0]).args(&argv[1..]).run() {
            Ok(out) if out.exit_code == Some(0) => format!("formatted `{path}` with `{shown}`"),
            Ok(out) => format!(
                "`{shown}` failed (exit {:?}); the file is as the tool wrote it:\n{}",
                out.exit_code,
                out.stderr.trim_end()
            ),
            Err(e) => format!("`{shown}` could not run ({e}); the file was not formatted"),
        };
        Decision::AddContext(report)
    }
}

corral_sdk::hook!(Format);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_language_has_its_formatter() {
        assert_eq!(
            formatter("src/main.rs", None).unwrap().unwrap(),
            ["rustfmt", "--edition", "2024", "src/main.rs"]
        );
        assert_eq!(
            formatter("web/app.TSX", None).unwrap().unwrap(),
            ["prettier", "--write", "web/app.TSX"]
        );
        assert_eq!(
            formatter("x.py", Some(r#"["black", "-q"]"#))
                .unwrap()
                .unwrap(),
            ["black", "-q", "x.py"]
        );
        assert_eq!(
            formatter("--plugin=./evil.mjs", None).unwrap().unwrap(),
            ["prettier", "--write", "./--plugin=./evil.mjs"]
        );
        assert_eq!(formatter("README.md", None).unwrap(), None);
        assert_eq!(formatter("Makefile", None).unwrap(), None);
        assert!(formatter("x.py", Some("black")).is_err());
        assert_eq!(
            written_path(&json!({"path": "a.rs", "content": ""})),
            Some("a.rs")
        );
        assert_eq!(written_path(&json!({"content": ""})), None);
    }
}
