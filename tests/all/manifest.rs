//! Manifest errors: each names the file, the line and the fix.

use crate::support::text::{has, has_all};
use crate::*;
use corral_test_programs::ECHO;
use pretty_assertions::assert_eq;

/// A manifest that must be refused: what the case promises, the manifest,
/// the position its error must start with (where the case checks one) and
/// the parts the error must hold.
struct Refused {
    case: &'static str,
    toml: String,
    at: Option<&'static str>,
    parts: &'static [&'static str],
}

/// The cases of [`refused_manifests_name_the_mistake_and_the_fix`].
fn refused() -> Vec<Refused> {
    let fs = |rest: &str| format!("[plugins.fs]\nsource = \"builtin:fs\"\n{rest}\n");
    let x = |rest: &str| format!("[plugins.x]\n{rest}\n");
    vec![
        Refused {
            case: "an unknown key is an error with its line",
            toml: fs("grant.fs = []"),
            at: Some("corral.toml:3:"),
            parts: &["unknown field `grant`", "help:"],
        },
        Refused {
            case: "an unknown grant key is an error",
            toml: fs(r#"grants.fs = [{ path = ".", acess = "rw" }]"#),
            at: Some("corral.toml:3:"),
            parts: &["acess"],
        },
        Refused {
            case: "a missing grant directory is an error",
            toml: fs(r#"grants.fs = [{ path = "nope", access = "ro" }]"#),
            at: None,
            parts: &["`nope` cannot be opened"],
        },
        Refused {
            case: "a bad env name is an error",
            toml: fs(r#"grants.env = ["NOT A VAR"]"#),
            at: None,
            parts: &["not an environment variable name"],
        },
        Refused {
            case: "a limit out of range is an error",
            toml: fs("limits = { memory_mb = 0 }"),
            at: None,
            parts: &["limits.memory_mb = 0 is out of range"],
        },
        Refused {
            case: "an unknown built-in source lists the built-ins",
            toml: x(r#"source = "builtin:nope""#),
            at: None,
            parts: &[
                "no built-in plugin `nope`",
                "built-in plugins: fs, search, replay, openai, anthropic",
            ],
        },
        Refused {
            case: "a pin on a built-in is refused",
            toml: x(&format!(
                "source = \"builtin:fs\"\nsha256 = \"{}\"",
                "a".repeat(64)
            )),
            at: None,
            parts: &["remove `sha256`"],
        },
        Refused {
            case: "a short pin is refused",
            toml: x("source = \"x.wasm\"\nsha256 = \"abc\""),
            at: None,
            parts: &["64 hexadecimal digits"],
        },
        Refused {
            case: "a plugin without a source is refused",
            toml: x("grants.env = []"),
            at: None,
            parts: &["has no `source`"],
        },
        Refused {
            case: "a bad plugin name is refused",
            toml: "[plugins.Bad]\nsource = \"builtin:fs\"\n".to_owned(),
            at: None,
            parts: &["not a valid plugin name"],
        },
    ]
}

#[test]
fn refused_manifests_name_the_mistake_and_the_fix() {
    let sb = Sandbox::new();
    for c in refused() {
        let err = sb
            .manifest(&c.toml)
            .err()
            .unwrap_or_else(|| panic!("{}: accepted", c.case));
        if let Some(at) = c.at {
            assert!(err.starts_with(at), "{}: {err}", c.case);
        }
        for part in c.parts {
            assert!(err.contains(part), "{}: no {part:?} in {err}", c.case);
        }
    }
}

#[test]
fn grant_outside_workspace_needs_opt_in() {
    let sb = Sandbox::new();
    let toml = "[plugins.fs]\nsource = \"builtin:fs\"\ngrants.fs = [{ path = \"../outside\", access = \"ro\" }]\n";
    let err = sb.manifest(toml).expect_err("outside");
    assert!(err.starts_with("corral.toml:3:"), "{err}");
    has_all(&err, &["outside the workspace", "outside_workspace = true"]);
    let ok = sb
        .manifest(&toml.replace(
            "access = \"ro\"",
            "access = \"ro\", outside_workspace = true",
        ))
        .expect("opted in");
    let grant = &ok.plugins[0].fs[0];
    assert_eq!(grant.host_path, sb.outside().canonicalize().expect("canon"));
    assert_eq!(grant.guest_path, grant.host_path.to_string_lossy());
}

#[test]
fn symlinked_grant_leading_outside_is_caught() {
    let sb = Sandbox::new();
    std::os::unix::fs::symlink(sb.outside(), sb.ws().join("sneaky")).expect("symlink");
    let err = sb
        .manifest("[plugins.fs]\nsource = \"builtin:fs\"\ngrants.fs = [{ path = \"sneaky\", access = \"ro\" }]\n")
        .expect_err("symlink out");
    has(&err, "outside the workspace");
}

#[test]
fn bad_net_patterns_are_errors() {
    let sb = Sandbox::new();
    for bad in [
        "api.openai.com",
        "ftp://x:21",
        "https://a/b",
        "https://*:443",
        "http://h:port",
    ] {
        let err = sb
            .manifest(&format!(
                "[plugins.fs]\nsource = \"builtin:fs\"\ngrants.net = [{bad:?}]\n"
            ))
            .err()
            .unwrap_or_else(|| panic!("{bad} accepted"));
        assert!(err.starts_with("corral.toml:3:"), "{err}");
        has(&err, "scheme://host:port");
    }
    let ok = sb
        .manifest("[plugins.fs]\nsource = \"builtin:fs\"\ngrants.net = [\"https://*.example.com\", \"http://127.0.0.1:8080\"]\n")
        .expect("good patterns");
    let net = &ok.plugins[0].net;
    assert!(net[0].allows("https", "api.example.com", 443));
    assert!(!net[0].allows("https", "example.com", 443));
    assert!(!net[0].allows("https", "evilexample.com", 443));
    assert!(!net[0].allows("http", "api.example.com", 443));
    assert!(net[1].allows("http", "127.0.0.1", 8080));
    assert!(!net[1].allows("http", "127.0.0.1", 8081));
}

#[tokio::test]
async fn duplicate_tool_names_are_an_error_naming_both() {
    let sb = Sandbox::new();
    let toml = plugins_toml(&[("one", ECHO, ""), ("two", ECHO, "")]);
    let err = sb.load(&toml).await.expect_err("duplicate");
    assert!(
        err.contains("tool `config_get` is exported by two plugins")
            || err.contains("tool `echo` is exported by two plugins"),
        "{err}"
    );
    has_all(
        &err,
        &[
            "`one` (corral.toml:2)",
            "`two` (corral.toml:5)",
            "enabled = false",
        ],
    );
}

#[test]
fn layers_replace_entries_and_can_disable() {
    let sb = Sandbox::new();
    let m = sb.manifest_with_defaults("").expect("defaults");
    let names: Vec<&str> = m.plugins.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "anthropic",
            "fs",
            "git",
            "openai",
            "replay",
            "search",
            "shell",
            "web-fetch"
        ]
    );
    let m = sb
        .manifest_with_defaults("[plugins.search]\nenabled = false\n\n[plugins.fs]\nsource = \"builtin:fs\"\ngrants.fs = [{ path = \".\", access = \"ro\" }]\n")
        .expect("override");
    let fs = m.plugins.iter().find(|p| p.name == "fs").expect("fs");
    assert!(!m.plugins.iter().any(|p| p.name == "search"));
    assert_eq!(fs.fs[0].access, corral_manifest::Access::Ro);
    assert_eq!(fs.origin.to_string(), "corral.toml:5");
}

#[test]
fn relative_source_is_resolved_against_the_manifest() {
    let sb = Sandbox::new();
    let m = sb
        .manifest("[plugins.x]\nsource = \"tools/x.wasm\"\n")
        .expect("parses");
    match &m.plugins[0].source {
        corral_manifest::Source::File { path, .. } => {
            assert_eq!(path, &sb.ws().join("tools/x.wasm"))
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn missing_wasm_file_is_a_load_error() {
    let sb = Sandbox::new();
    let err = sb
        .load("[plugins.x]\nsource = \"tools/x.wasm\"\n")
        .await
        .expect_err("missing");
    has_all(&err, &["cannot read", "corral.toml:2"]);
}
