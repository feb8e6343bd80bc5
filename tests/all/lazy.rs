//! A command loads only the plugins it needs: tools come from the
//! description cache, and a plugin is compiled and run only when one of its
//! tools is called. Each test gives the `corral` binary its own cache
//! directory, so what it observes there is its own doing.

use crate::support::files::{place, sha256_of};
use crate::support::output::{stderr, stdout};
use crate::support::text::{has, has_all, lacks};
use crate::*;
use corral_test_programs::{DESCRIBE_READS, ECHO, TRUSTPIN};
use std::process::Output;

/// The `corral` binary with a cache directory of its own.
struct Lazy {
    cli: Cli,
    sb: Sandbox,
}

impl Lazy {
    fn new(manifest: &str) -> Self {
        let sb = Sandbox::new();
        place(&sb, TRUSTPIN, "tools/named.wasm");
        place(&sb, ECHO, "tools/echo.wasm");
        sb.write("corral.toml", manifest);
        Self {
            cli: Cli::new(),
            sb,
        }
    }

    fn cache(&self) -> PathBuf {
        self.cli.home.path().join("cache")
    }

    /// The compile cache's directory.
    fn components(&self) -> PathBuf {
        self.cache().join("corral").join("components")
    }

    fn run(&self, args: &[&str]) -> Output {
        self.run_env(args, &[])
    }

    fn run_env(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let cache = self.cache();
        let mut all = vec![("XDG_CACHE_HOME", cache.to_str().expect("utf-8 path"))];
        all.extend_from_slice(env);
        self.cli.run_env(&self.sb.ws(), args, &all)
    }

    /// `-v tools list --json`: the tool names and the log.
    fn tools(&self, env: &[(&str, &str)]) -> (Vec<String>, String) {
        let o = self.run_env(&["-v", "tools", "list", "--json"], env);
        assert!(o.status.success(), "{}", stderr(&o));
        let list: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("json");
        let names = list
            .as_array()
            .expect("list")
            .iter()
            .filter_map(|t| t["name"].as_str().map(str::to_owned))
            .collect();
        (names, stderr(&o))
    }

    /// The files of the description cache.
    fn descriptions(&self) -> Vec<PathBuf> {
        match std::fs::read_dir(self.components().join("tools")) {
            Ok(r) => r.map(|e| e.expect("entry").path()).collect(),
            Err(_) => Vec::new(),
        }
    }

    /// Removes every compiled component, keeping the descriptions.
    fn drop_compiled(&self) {
        for e in std::fs::read_dir(self.components()).expect("cache dir") {
            let p = e.expect("entry").path();
            if p.is_file() {
                std::fs::remove_file(p).expect("remove");
            }
        }
    }

    /// The SHA-256s of the compiled components in the cache.
    fn compiled(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(self.components())
            .expect("cache dir")
            .filter_map(|e| {
                let name = e.expect("entry").file_name().into_string().ok()?;
                let stem = name.strip_suffix(".cwasm")?;
                Some(stem.split('-').next()?.to_owned())
            })
            .collect();
        v.sort();
        v
    }
}

/// Log lines saying that a component was compiled or loaded from the
/// compile cache.
fn loads(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| l.contains("compile cache hit") || l.contains("compiled ("))
        .collect()
}

const NAMED_AND_ECHO: &str = "[plugins.named]\nsource = \"tools/named.wasm\"\n\
     config = { tool = \"alpha\", describe_log = \"yes\" }\n\n\
     [plugins.echo]\nsource = \"tools/echo.wasm\"\n";

#[test]
fn a_tool_call_loads_only_the_plugin_that_serves_it() {
    let l = Lazy::new(NAMED_AND_ECHO);
    let (tools, log) = l.tools(&[]);
    assert!(tools.contains(&"alpha".to_owned()) && tools.contains(&"echo".to_owned()));
    assert_eq!(log.matches("described alpha").count(), 1, "{log}");

    // Warm: nothing is compiled, loaded or described to list the tools.
    let (again, log) = l.tools(&[]);
    assert_eq!(again, tools);
    lacks(&log, "described alpha");
    assert_eq!(loads(&log), Vec::<&str>::new(), "{log}");

    // With no compiled component left, calling `echo` compiles only its
    // plugin: the cache then holds that one component and nothing else.
    l.drop_compiled();
    let o = l.run(&["-v", "tool", "call", "echo", "--args", r#"{"text":"hi"}"#]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "hi\n");
    let log = stderr(&o);
    lacks(&log, "described alpha");
    let loaded = loads(&log);
    assert!(
        loaded.len() == 1 && loaded[0].contains("plugin=echo"),
        "{log}"
    );
    assert_eq!(
        l.compiled(),
        vec![sha256_of(l.sb.ws().join("tools/echo.wasm"))]
    );

    // And the other plugin still works when it is the one called.
    let o = l.run(&["tool", "call", "alpha"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "alpha\n");
}

#[test]
fn a_changed_entry_or_environment_is_described_again() {
    let manifest = |tool: &str| {
        format!(
            "[plugins.named]\nsource = \"tools/named.wasm\"\ngrants.env = [\"LAZY_MARK\"]\n\
             config = {{ tool = \"{tool}\", describe_log = \"yes\" }}\n"
        )
    };
    let l = Lazy::new(&manifest("alpha"));
    let mark = [("LAZY_MARK", "1")];
    let (_, log) = l.tools(&mark);
    has(&log, "described alpha");
    let (_, log) = l.tools(&mark);
    lacks(&log, "described alpha");

    // The value of a granted environment variable is part of the key.
    let (_, log) = l.tools(&[("LAZY_MARK", "2")]);
    has(&log, "described alpha");

    // So is the config: the new tool name shows, the old one is gone.
    l.sb.write("corral.toml", &manifest("beta"));
    let (tools, log) = l.tools(&mark);
    has(&log, "described beta");
    assert!(
        tools.contains(&"beta".to_owned()) && !tools.contains(&"alpha".to_owned()),
        "{tools:?}"
    );
    let o = l.run_env(&["tool", "call", "beta"], &mark);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "beta\n");
}

#[test]
fn a_damaged_description_is_ignored() {
    let l = Lazy::new(NAMED_AND_ECHO);
    l.tools(&[]);
    let files = l.descriptions();
    assert!(files.len() >= 2, "{files:?}");
    // Every entry changed: one still parses but names another tool, the
    // others are cut short.
    for (i, f) in files.iter().enumerate() {
        let text = std::fs::read_to_string(f).expect("read entry");
        let damaged = if text.contains("\"alpha\"") {
            text.replace("\"alpha\"", "\"omega\"")
        } else {
            text[..text.len() / 2 + i % 3].to_owned()
        };
        std::fs::write(f, damaged).expect("damage entry");
    }
    let (tools, log) = l.tools(&[]);
    assert!(tools.contains(&"alpha".to_owned()), "{tools:?}");
    assert!(!tools.contains(&"omega".to_owned()), "{tools:?}");
    has_all(&log, &["described alpha", "ignored (checksum mismatch)"]);
    // Described again, stored again: the next command trusts the new entry.
    let (_, log) = l.tools(&[]);
    lacks(&log, "described alpha");
    let o = l.run(&["tool", "call", "alpha"]);
    assert_eq!(stdout(&o), "alpha\n", "{}", stderr(&o));
}

#[test]
fn clearing_the_cache_clears_the_descriptions() {
    let l = Lazy::new(NAMED_AND_ECHO);
    l.tools(&[]);
    assert!(!l.descriptions().is_empty());
    let o = l.run(&["plugin", "cache", "--clear"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(l.descriptions(), Vec::<PathBuf>::new());
    let (_, log) = l.tools(&[]);
    has(&log, "described alpha");
}

#[test]
fn the_cache_can_be_turned_off() {
    let l = Lazy::new(NAMED_AND_ECHO);
    let off = [("CORRAL_TOOL_CACHE", "off")];
    for _ in 0..2 {
        let (_, log) = l.tools(&off);
        has(&log, "described alpha");
    }
    assert_eq!(l.descriptions(), Vec::<PathBuf>::new());
}

#[test]
fn a_pin_is_checked_when_the_description_is_cached() {
    let l = Lazy::new("");
    let pin = sha256_of(l.sb.ws().join("tools/named.wasm"));
    l.sb.write(
        "corral.toml",
        &format!(
            "[plugins.named]\nsource = \"tools/named.wasm\"\nsha256 = \"{pin}\"\n\
             config = {{ tool = \"alpha\" }}\n\n\
             [plugins.echo]\nsource = \"tools/echo.wasm\"\n"
        ),
    );
    let o = l.run(&["tool", "call", "alpha"]);
    assert_eq!(stdout(&o), "alpha\n", "{}", stderr(&o));
    assert!(!l.descriptions().is_empty());

    // Another component under the pinned name: refused before it runs,
    // although the entry's description is cached.
    place(&l.sb, ECHO, "tools/named.wasm");
    let o = l.run(&["tool", "call", "alpha"]);
    assert_eq!(o.status.code(), Some(2), "{}", stdout(&o));
    let err = stderr(&o);
    has(&err, format!("but the manifest pins {pin}"));
    assert_eq!(stdout(&o), "");
}

#[test]
fn tools_that_follow_files_are_never_cached() {
    let l = Lazy::new(
        "[plugins.reads]\nsource = \"tools/reads.wasm\"\n\
         grants.fs = [{ path = \".\", access = \"ro\" }]\n",
    );
    place(&l.sb, DESCRIBE_READS, "tools/reads.wasm");
    l.sb.write("tools.txt", "first_tool\n");
    let (tools, _) = l.tools(&[]);
    assert!(tools.contains(&"first_tool".to_owned()), "{tools:?}");
    l.sb.write("tools.txt", "second_tool\n");
    // What it describes now is not what was reviewed: withheld, and the
    // warning shows the new answer, not a stale one.
    let (tools, log) = l.tools(&[]);
    assert!(
        !tools.iter().any(|t| t.ends_with("_tool")),
        "{tools:?}\n{log}"
    );
    has(&log, "+ new tool `second_tool`");
    let o = l.run(&["plugin", "review", "--yes"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let (tools, log) = l.tools(&[]);
    assert!(
        tools.contains(&"second_tool".to_owned()) && !tools.contains(&"first_tool".to_owned()),
        "{tools:?}\n{log}"
    );
    let o = l.run(&["tool", "call", "second_tool"]);
    assert_eq!(stdout(&o), "second_tool\n", "{}", stderr(&o));
}

/// What a session and the MCP server get from `Runtime::load`: plugins whose
/// tools are known, compiled only when first called.
#[tokio::test]
async fn a_plugin_is_compiled_at_its_first_call() {
    use corral_runtime::CacheOutcome;
    let sb = Sandbox::new();
    let toml = plugins_toml(&[
        ("named", TRUSTPIN, "config = { tool = \"alpha\" }"),
        ("echo", ECHO, ""),
    ]);
    // Cold: every plugin is compiled (or loaded) to be described, one at a
    // time, and its code let go once its tools are in the description
    // cache: a first run holds no more code than a later one.
    let cold = sb.load(&toml).await.expect("load");
    assert!(
        cold.plugins().iter().all(|p| p.cache_outcome().is_none()),
        "{cold:?}"
    );
    let outcome = |plugins: &corral_runtime::Plugins, name: &str| {
        plugins
            .plugins()
            .iter()
            .find(|p| p.decl().name == name)
            .expect("plugin")
            .cache_outcome()
    };
    // Warm: the same tools, nothing compiled until a call needs it.
    let warm = sb.load(&toml).await.expect("load");
    let names = |p: &corral_runtime::Plugins| {
        p.tools()
            .iter()
            .map(|(_, t)| t.name.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(names(&warm), names(&cold));
    // The cold load's first call loads the code it let go, from the cache.
    let out = call(&cold, "echo", serde_json::json!({ "text": "cold" }))
        .await
        .expect("echo");
    assert_eq!(out.content, "cold");
    assert_eq!(outcome(&cold, "echo"), Some(CacheOutcome::Hit));
    assert_eq!(outcome(&warm, "named"), None);
    assert_eq!(outcome(&warm, "echo"), None);
    let out = call(&warm, "echo", serde_json::json!({ "text": "hi" }))
        .await
        .expect("echo");
    assert_eq!(out.content, "hi");
    assert_eq!(outcome(&warm, "echo"), Some(CacheOutcome::Hit));
    assert_eq!(outcome(&warm, "named"), None);
}
