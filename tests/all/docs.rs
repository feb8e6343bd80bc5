//! The documentation cannot drift: every fenced block marked `sh runnable`
//! in the READMEs is run against a scratch workspace with the built binary,
//! every `toml` block of the top-level README loads with the real manifest
//! loader (and its profile example runs as written), every relative link
//! leads somewhere that exists, and the top-level README stays short enough
//! to read.

use crate::support::text::has;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The READMEs the project ships, relative to the repository root.
const DOCS: &[&str] = &[
    "README.md",
    "host/README.md",
    "sdk/README.md",
    "wit/README.md",
    "plugins/README.md",
    "tests/README.md",
];

/// The most lines the top-level README may have.
const README_MAX_LINES: usize = 350;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the host crate has a parent")
        .to_path_buf()
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The fenced blocks of `text`: (info string, body, line of the fence).
fn blocks(text: &str) -> Vec<(String, String, usize)> {
    let mut out = Vec::new();
    let mut open: Option<(String, String, usize)> = None;
    for (n, line) in text.lines().enumerate() {
        match &mut open {
            None if line.starts_with("```") => {
                open = Some((line[3..].trim().to_owned(), String::new(), n + 1));
            }
            Some(_) if line.starts_with("```") => out.extend(open.take()),
            Some((_, body, _)) => {
                body.push_str(line);
                body.push('\n');
            }
            None => {}
        }
    }
    assert!(open.is_none(), "a fenced block is never closed");
    out
}

/// The lines of `text` outside fenced blocks, with inline code removed.
fn prose(text: &str) -> Vec<(usize, String)> {
    let mut fenced = false;
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            let mut kept = String::new();
            for (i, part) in line.split('`').enumerate() {
                if i % 2 == 0 {
                    kept.push_str(part);
                }
            }
            out.push((n + 1, kept));
        }
    }
    out
}

/// GitHub's anchor for a heading: lower case, punctuation other than `-`
/// and `_` dropped, spaces made `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn anchors(text: &str) -> HashSet<String> {
    let mut fenced = false;
    let mut seen = HashSet::new();
    for line in text.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            let base = slug(line.trim_start_matches('#'));
            let mut anchor = base.clone();
            let mut n = 0;
            while !seen.insert(anchor.clone()) {
                n += 1;
                anchor = format!("{base}-{n}");
            }
        }
    }
    seen
}

/// The targets of the Markdown links on a line: `[text](target)`.
fn links(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        match after.find(')') {
            Some(end) => {
                out.push(after[..end].to_owned());
                rest = &after[end..];
            }
            None => break,
        }
    }
    out
}

#[test]
fn the_readme_is_short_and_the_references_exist() {
    let lines = read("README.md").lines().count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md has {lines} lines; keep it under {README_MAX_LINES} and move references \
         into the README of the crate they describe"
    );
    for doc in DOCS {
        assert!(root().join(doc).is_file(), "{doc} is missing");
    }
}

#[test]
fn every_relative_link_leads_somewhere() {
    let mut broken = Vec::new();
    for doc in DOCS {
        let text = read(doc);
        let dir = root()
            .join(doc)
            .parent()
            .expect("a file has a parent")
            .to_path_buf();
        for (n, line) in prose(&text) {
            for target in links(&line) {
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                let (path, anchor) = match target.split_once('#') {
                    Some((p, a)) => (p, Some(a)),
                    None => (target.as_str(), None),
                };
                let file = if path.is_empty() {
                    root().join(doc)
                } else {
                    dir.join(path)
                };
                if !file.exists() {
                    broken.push(format!("{doc}:{n}: `{target}`: no such file"));
                    continue;
                }
                if let Some(anchor) = anchor {
                    let heads = anchors(&std::fs::read_to_string(&file).unwrap_or_default());
                    if !heads.contains(anchor) {
                        broken.push(format!("{doc}:{n}: `{target}`: no such heading"));
                    }
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// A workspace like a user's project: a README, a source file, a repository.
fn scratch() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("README.md"),
        "# hello\n\nA tiny project that greets.\n",
    )
    .expect("readme");
    std::fs::create_dir(dir.path().join("src")).expect("src");
    std::fs::write(
        dir.path().join("src/main.rs"),
        "fn main() {\n    println!(\"hello\");\n}\n",
    )
    .expect("main.rs");
    let git = Command::new("git")
        .args(["init", "-q"])
        .current_dir(dir.path())
        .status();
    assert!(
        git.is_ok_and(|s| s.success()),
        "git init in the scratch workspace"
    );
    dir
}

#[test]
fn every_runnable_command_runs() {
    let bin = tempfile::tempdir().expect("bin dir");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_corral"), bin.path().join("corral"))
        .expect("link corral");
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut ran = 0;
    for doc in DOCS {
        for (info, body, line) in blocks(&read(doc)) {
            if info != "sh runnable" {
                continue;
            }
            let ws = scratch();
            let home = tempfile::tempdir().expect("home");
            let out = Command::new("sh")
                .args(["-e", "-c", &body])
                .current_dir(ws.path())
                .env("PATH", &path)
                .env("HOME", home.path())
                .env("XDG_CONFIG_HOME", home.path().join("config"))
                .env("XDG_DATA_HOME", home.path().join("data"))
                .env("XDG_CACHE_HOME", crate::cache_home())
                .env_remove("OPENAI_API_KEY")
                .env_remove("ANTHROPIC_API_KEY")
                .env_remove("CORRAL_LOG")
                .stdin(std::process::Stdio::null())
                .output()
                .expect("run sh");
            assert!(
                out.status.success(),
                "{doc}:{line}: the runnable block failed ({}):\n{body}\nstdout:\n{}\nstderr:\n{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            ran += 1;
        }
    }
    assert!(ran > 0, "no `sh runnable` block found in {DOCS:?}");
}

#[test]
fn the_slugs_follow_github() {
    assert_eq!(slug(" `run` and `--json`"), "run-and---json");
    assert_eq!(
        slug(" Running programs: `shell` and `git`"),
        "running-programs-shell-and-git"
    );
    assert_eq!(links("see [a](b.md#c) and [d](e)"), vec!["b.md#c", "e"]);
}

/// The READMEs whose `toml` blocks are manifests a user copies.
const CONFIG_DOCS: &[&str] = &["README.md"];

/// The user's config of the `corral` a doc's command runs as: `home` holds
/// it; `sh` runs `body` with the built binary first on the PATH.
fn run_sh(body: &str, ws: &Path, home: &Path) -> std::process::Output {
    let bin = home.join("bin");
    std::fs::create_dir_all(&bin).expect("bin dir");
    let link = bin.join("corral");
    if !link.exists() {
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_corral"), &link).expect("link corral");
    }
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    Command::new("sh")
        .args(["-e", "-c", body])
        .current_dir(ws)
        .env("PATH", &path)
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("XDG_DATA_HOME", home.join("data"))
        .env("XDG_CACHE_HOME", crate::cache_home())
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("ANTHROPIC_BASE_URL")
        .env_remove("CORRAL_LOG")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run sh")
}

// Before: the README's examples were never loaded; this one failed on the
// built-in key's origin (`<built-in defaults>:43:1`) when it was.
#[test]
fn every_config_example_loads() {
    let mut loaded = 0;
    for doc in CONFIG_DOCS {
        for (info, body, line) in blocks(&read(doc)) {
            if info != "toml" {
                continue;
            }
            let sb = crate::Sandbox::new();
            if let Err(e) = sb.manifest_with_defaults(&body) {
                panic!("{doc}:{line}: the example does not load: {e}\n{body}");
            }
            loaded += 1;
        }
    }
    assert!(loaded > 0, "no `toml` block found in {CONFIG_DOCS:?}");
}

// Before: `corral run --profile local ...` failed with `plugin openai:
// secret for https://api.openai.com:443, which grants.net does not allow`,
// naming a line of the built-in defaults.
#[test]
fn the_profile_example_runs_as_written() {
    use crate::support::mock::{MockServer, Reply, openai_sse};
    let readme = blocks(&read("README.md"));
    let (profile, at) = readme
        .iter()
        .find(|(info, body, _)| info == "toml" && body.contains("[profiles."))
        .map(|(_, body, line)| (body.clone(), *line))
        .expect("the README shows a profile");
    let command = readme
        .iter()
        .find(|(info, body, line)| info == "sh" && *line > at && body.contains("--profile"))
        .map(|(_, body, _)| body.clone())
        .expect("the README runs the profile");
    let mock = MockServer::start(|_, _| Reply::Sse(openai_sse("Summarised.", &[])));
    // The example's local server is the mock, on the port it got.
    has(&profile, "127.0.0.1:11434");
    let profile = profile.replace("127.0.0.1:11434", &format!("127.0.0.1:{}", mock.port));
    let home = tempfile::tempdir().expect("home");
    std::fs::create_dir_all(home.path().join("config/corral")).expect("config");
    std::fs::write(home.path().join("config/corral/corral.toml"), &profile).expect("config");
    let ws = scratch();
    let out = run_sh(&command, ws.path(), home.path());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "README.md:{at}: {command}\n{err}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("Summarised."));
    let requests = mock.requests();
    assert_eq!(requests[0].body["model"], "llama3.1", "{err}");
    // The built-in key for api.openai.com is not sent to the local server,
    // and a note says so.
    assert_eq!(requests[0].header("authorization"), None);
    has(&err, "built-in `authorization` header is not sent");
}

/// Each front-end has its section in the top-level README naming the
/// command that starts it, and the editors' settings are JSON whose
/// command, run as written, answers an ACP `initialize`.
#[test]
fn the_readme_has_a_section_per_front_end() {
    let readme = read("README.md");
    for (heading, command) in [
        ("## The terminal UI", "`corral`"),
        ("## Scripts: `run` and `--json`", "corral run"),
        ("## MCP", "corral mcp serve"),
        ("## Editors (ACP)", "corral acp"),
    ] {
        let at = readme
            .find(&format!("\n{heading}\n"))
            .unwrap_or_else(|| panic!("README.md has no `{heading}` section"));
        let body = &readme[at + heading.len() + 2..];
        let body = &body[..body.find("\n## ").unwrap_or(body.len())];
        assert!(
            body.contains(command),
            "README.md's `{heading}` does not name `{command}`"
        );
    }
    let (_, settings, line) = blocks(&readme)
        .into_iter()
        .find(|(info, body, _)| info == "json" && body.contains("agent_servers"))
        .expect("README.md shows an editor's agent_servers settings");
    let settings: serde_json::Value = serde_json::from_str(&settings)
        .unwrap_or_else(|e| panic!("README.md:{line}: the editors' settings are not JSON: {e}"));
    let server = &settings["agent_servers"]["corral"];
    assert_eq!(server["command"], "corral", "README.md:{line}");
    let args: Vec<&str> = server["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    let ws = scratch();
    let home = tempfile::tempdir().expect("home");
    let mut child = Command::new(env!("CARGO_BIN_EXE_corral"))
        .args(&args)
        .current_dir(ws.path())
        .env("XDG_CONFIG_HOME", home.path().join("config"))
        .env("XDG_DATA_HOME", home.path().join("data"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start corral acp");
    {
        use std::io::Write as _;
        let mut stdin = child.stdin.take().expect("stdin");
        writeln!(
            stdin,
            r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":1}}}}"#
        )
        .expect("write");
    }
    let out = child.wait_with_output().expect("corral acp");
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "README.md:{line}: `corral {}` did not answer initialize ({e}): {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert_eq!(answer["result"]["protocolVersion"], 1, "{answer}");
}
