//! `corral plugin new` and `corral plugin wit`: each template, as the real
//! binary writes it, builds with the one command its README documents,
//! passes its own tests, loads with nothing but a read-only workspace grant,
//! answers through `corral tool call`, and cannot read outside the workspace,
//! whether by a `..` path or by a symlink.
//!
//! The Python and JavaScript tests need the toolchains the templates pin;
//! `.ci/run` installs them and sets `CORRAL_COMPONENTIZE_PY` and
//! `CORRAL_JS_TOOLCHAIN`. Without them those tests are counted as skipped
//! (and fail under CI, where `CORRAL_CI` is set).

use crate::support::output::report as text;
use crate::support::output::{stderr, stdout};
use crate::support::process::run_ok;
use crate::support::run::argv_with;
use crate::support::text::{has, lacks};
use crate::*;
use std::path::Path;
use std::process::{Command, Output};

/// The toolchain path in `var`, or `None`, the test counted as skipped.
fn toolchain(var: &str) -> Option<PathBuf> {
    let found = std::env::var_os(var).map(PathBuf::from);
    if found.is_none() {
        crate::support::skip::missing(
            format!("{var} is unset (the plugin templates' toolchain)"),
            crate::support::skip::CI_RUN,
        );
    }
    found
}

/// `corral plugin new NAME --lang LANG` in a directory beside the workspace.
fn new_project(cli: &Cli, sb: &Sandbox, name: &str, lang: &str) -> PathBuf {
    let dir = sb.root.path().join(name);
    let o = cli.run(
        sb.root.path(),
        &[
            "plugin",
            "new",
            name,
            "--lang",
            lang,
            "--dir",
            dir.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "plugin new: {}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("created"),
        "{}",
        text(&o)
    );
    dir
}

/// The project's README documents `command` as its build command.
fn assert_documented(project: &Path, command: &str) {
    let readme = std::fs::read_to_string(project.join("README.md")).unwrap();
    assert!(
        readme.contains(command),
        "README does not document `{command}`:\n{readme}"
    );
}

/// The manifest entry of the template's `corral-plugin.toml` asks for a
/// read-only workspace and nothing else.
/// The toolchain in `var` ([`toolchain`]), then a new `lang` plugin
/// `name` made by `corral plugin new` ([`new_project`]) whose requests are
/// checked ([`assert_requests`]): the toolchain, the sandbox, the home and
/// the project's directory.
fn template(var: &str, name: &str, lang: &str) -> Option<(PathBuf, Sandbox, Cli, PathBuf)> {
    let toolchain = toolchain(var)?;
    let (sb, cli) = (Sandbox::new(), Cli::new());
    let project = new_project(&cli, &sb, name, lang);
    assert_requests(&project, name);
    Some((toolchain, sb, cli, project))
}

fn assert_requests(project: &Path, name: &str) {
    let toml: toml::Table = std::fs::read_to_string(project.join("corral-plugin.toml"))
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(toml["plugin"]["name"].as_str(), Some(name));
    assert_eq!(toml["plugin"]["version"].as_str(), Some("0.1.0"));
    let requests = toml["requests"].as_table().unwrap();
    assert_eq!(
        requests.keys().collect::<Vec<_>>(),
        ["fs"],
        "only fs is requested"
    );
    assert_eq!(requests["fs"][0]["path"].as_str(), Some("."));
    assert_eq!(requests["fs"][0]["access"].as_str(), Some("ro"));
}

/// Loads `wasm` as plugin `name` granted only the workspace, read-only, and
/// checks `file_stats` through the real binary: a workspace file is counted;
/// `..` and a symlink leading out are refused without the secret leaking.
fn assert_plugin_works(cli: &Cli, sb: &Sandbox, name: &str, wasm: &Path) {
    assert!(wasm.is_file(), "the build wrote no {}", wasm.display());
    sb.write(
        "corral.toml",
        &plugin_toml(
            name,
            wasm.to_str().unwrap(),
            "grants.fs = [{ path = \".\", access = \"ro\" }]",
        ),
    );
    let call = |args: &str| cli.run(&sb.ws(), &["tool", "call", "file_stats", "--args", args]);

    let o = call(r#"{"path":"hello.txt"}"#);
    assert!(o.status.success(), "file_stats hello.txt: {}", text(&o));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "hello.txt: 1 lines, 4 words, 25 characters\n"
    );

    let o = cli.run(
        &sb.ws(),
        &[
            "tool",
            "call",
            "file_stats",
            "--args",
            r#"{"path":"hello.txt"}"#,
            "--json",
        ],
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let data = match &v["ok"]["data"] {
        serde_json::Value::String(s) => serde_json::from_str(s).unwrap(),
        other => other.clone(),
    };
    assert_eq!(
        data,
        serde_json::json!({"lines": 1, "words": 4, "chars": 25}),
        "{v}"
    );

    let o = call(r#"{"path":"../outside/secret.txt"}"#);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    has(&out, "leads out of the workspace");
    lacks(&out, SECRET);

    let o = call(r#"{"path":"nope.txt"}"#);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    has(&out, "`nope.txt` does not exist");

    // The plugin's own check does not see through a symlink; the host does.
    std::os::unix::fs::symlink(sb.outside().join("secret.txt"), sb.ws().join("link.txt")).unwrap();
    let o = call(r#"{"path":"link.txt"}"#);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    lacks(&out, SECRET);
    has(&out, "`link.txt` is outside what this plugin may access");

    let o = cli.run(&sb.ws(), &["plugin", "list", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
}

/// Runs the template's own tests with `cmd` (`what`), which must succeed
/// and print `passed` on the `stream` its runner reports on.
fn own_tests_pass(cmd: &mut Command, what: &str, stream: fn(&Output) -> String, passed: &str) {
    let o = run_ok(cmd, what);
    assert!(stream(&o).contains(passed), "{}", text(&o));
}

/// [`assert_plugin_works`] and [`assert_installable`] for the component
/// `NAME.wasm` the template built in `project`.
fn assert_built_plugin(cli: &Cli, sb: &Sandbox, project: &Path, name: &str) {
    let wasm = project.join(format!("{name}.wasm"));
    assert_plugin_works(cli, sb, name, &wasm);
    assert_installable(project, name, &wasm);
}

/// The project's README way to share it: `plugin pack` embeds its
/// corral-plugin.toml, and `plugin add` in a fresh home shows the request,
/// grants it and the tool works from the user's manifest.
fn assert_installable(project: &Path, name: &str, wasm: &Path) {
    let (sb, cli) = (Sandbox::new(), Cli::new());
    let packed = sb.root.path().join(format!("{name}.wasm"));
    let requests = project.join("corral-plugin.toml");
    let o = cli.run(
        &sb.ws(),
        &[
            "plugin",
            "pack",
            wasm.to_str().unwrap(),
            "--requests",
            requests.to_str().unwrap(),
            "-o",
            packed.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "pack: {}", text(&o));
    let o = cli.run(
        &sb.ws(),
        &["plugin", "add", packed.to_str().unwrap(), "--yes"],
    );
    let out = text(&o);
    assert!(o.status.success(), "add: {out}");
    has(&out, format!("Plugin `{name}` 0.1.0"));
    has(&out, "grant fs   . (read-only)");
    let o = cli.run(
        &sb.ws(),
        &argv_with("tool call file_stats --args", r#"{"path":"hello.txt"}"#),
    );
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "hello.txt: 1 lines, 4 words, 25 characters\n",
        "{}",
        text(&o)
    );
}

/// A command with the outer cargo's build settings removed, so a nested
/// cargo builds the project as a user's shell would.
fn clean_command(program: impl AsRef<std::ffi::OsStr>, dir: &Path) -> Command {
    let mut cmd = Command::new(program);
    cmd.current_dir(dir);
    for (key, _) in std::env::vars_os() {
        let Some(key) = key.to_str() else { continue };
        if matches!(
            key,
            "RUSTFLAGS"
                | "CARGO_ENCODED_RUSTFLAGS"
                | "CARGO_BUILD_RUSTFLAGS"
                | "CARGO_TARGET_DIR"
                | "CARGO_BUILD_TARGET"
                | "RUSTC_WRAPPER"
                | "RUSTC_WORKSPACE_WRAPPER"
                | "CARGO_MAKEFLAGS"
        ) || key.starts_with("CARGO_PKG_")
            || key.starts_with("CARGO_MANIFEST_")
        {
            cmd.env_remove(key);
        }
    }
    cmd
}

#[test]
fn the_rust_template_builds_tests_and_reads_only_the_workspace() {
    let (sb, cli) = (Sandbox::new(), Cli::new());
    let project = new_project(&cli, &sb, "rsplug", "rust");
    assert_requests(&project, "rsplug");
    let build = "cargo build --release --target wasm32-wasip2";
    assert_documented(&project, build);

    // The SDK beside the project is the SDK of this checkout, file for file.
    let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk/src");
    for entry in std::fs::read_dir(&sdk).unwrap() {
        let path = entry.unwrap().path();
        let copy = project
            .join("corral-sdk/src")
            .join(path.file_name().unwrap());
        assert_eq!(
            std::fs::read_to_string(&copy).ok(),
            std::fs::read_to_string(&path).ok(),
            "{} differs from the SDK",
            copy.display()
        );
    }

    // One target directory across runs keeps the dependencies built; the
    // registry is the one the workspace was built from.
    let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("template-rust");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = clean_command(&cargo, &project);
    cmd.args(build.split(' ').skip(1))
        .env("CARGO_TARGET_DIR", &target)
        .env("CARGO_NET_OFFLINE", "true");
    run_ok(&mut cmd, build);
    let mut cmd = clean_command(&cargo, &project);
    cmd.arg("test")
        .env("CARGO_TARGET_DIR", &target)
        .env("CARGO_NET_OFFLINE", "true");
    own_tests_pass(&mut cmd, "cargo test", stdout, "test result: ok. 3 passed");

    let wasm = target.join("wasm32-wasip2/release/rsplug.wasm");
    assert_plugin_works(&cli, &sb, "rsplug", &wasm);
    // The SDK's `requests!` already embedded corral-plugin.toml.
    let o = cli.run(&sb.ws(), &["plugin", "inspect", wasm.to_str().unwrap()]);
    has(&text(&o), "fs   . (read-only)");
    assert_installable(&project, "rsplug", &wasm);
}

#[test]
fn the_python_template_builds_tests_and_reads_only_the_workspace() {
    let Some((componentize_py, sb, cli, project)) =
        template("CORRAL_COMPONENTIZE_PY", "pyplug", "python")
    else {
        return;
    };
    let args = "-d wit -w tool-plugin componentize app -o pyplug.wasm";
    assert_documented(&project, &format!("componentize-py {args}"));

    // The toolchain is the one the template pins.
    let pyproject = std::fs::read_to_string(project.join("pyproject.toml")).unwrap();
    let o = run_ok(
        Command::new(&componentize_py).arg("--version"),
        "componentize-py --version",
    );
    let version = String::from_utf8_lossy(&o.stdout).trim().replace(' ', "==");
    assert!(
        pyproject.contains(&format!("\"{version}\"")),
        "{version} is not the version pinned in pyproject.toml:\n{pyproject}"
    );
    assert_documented(&project, &format!("pip install {version}"));

    run_ok(
        clean_command(&componentize_py, &project).args(args.split(' ')),
        "componentize-py",
    );
    own_tests_pass(
        clean_command("python3", &project).args(["-m", "unittest"]),
        "python3 -m unittest",
        stderr,
        "Ran 6 tests",
    );

    assert_built_plugin(&cli, &sb, &project, "pyplug");
}

#[test]
fn the_javascript_template_builds_tests_and_reads_only_the_workspace() {
    let Some((toolchain, sb, cli, project)) = template("CORRAL_JS_TOOLCHAIN", "jsplug", "js")
    else {
        return;
    };
    assert_documented(&project, "npm run build");

    // The installed toolchain is the one the template pins: same
    // devDependencies, same overrides.
    let read = |p: &Path| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(p.join("package.json")).unwrap()).unwrap()
    };
    let (ours, installed) = (read(&project), read(&toolchain));
    for key in ["devDependencies", "overrides"] {
        assert_eq!(
            ours[key],
            installed[key],
            "{key}: the toolchain in {} is not what the template pins; rerun .ci/run",
            toolchain.display()
        );
    }
    std::os::unix::fs::symlink(toolchain.join("node_modules"), project.join("node_modules"))
        .unwrap();

    run_ok(
        clean_command("npm", &project).args(["run", "build"]),
        "npm run build",
    );
    assert!(
        project
            .join("types/interfaces/corral-plugin-files.d.ts")
            .is_file(),
        "the build wrote no TypeScript types"
    );
    own_tests_pass(
        clean_command("npm", &project).arg("test"),
        "npm test",
        stdout,
        "# pass 6",
    );

    assert_built_plugin(&cli, &sb, &project, "jsplug");
}

#[test]
fn plugin_wit_writes_the_wit_the_binary_serves() {
    let (sb, cli) = (Sandbox::new(), Cli::new());
    let out = sb.root.path().join("wit-out");
    let o = cli.run(
        sb.root.path(),
        &["plugin", "wit", "--out", out.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", text(&o));

    // corral:plugin, file for file, and nothing else at the top.
    let wit = Path::new(env!("CARGO_MANIFEST_DIR")).join("../wit");
    // The WIT, not the documentation beside it (wit/README.md).
    let names = |dir: &Path| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n != "README.md")
            .collect();
        v.sort();
        v
    };
    let mut expected = names(&wit);
    expected.push("deps".into());
    expected.sort();
    assert_eq!(names(&out), expected);
    for name in names(&wit) {
        assert_eq!(
            std::fs::read_to_string(out.join(&name)).unwrap(),
            std::fs::read_to_string(wit.join(&name)).unwrap(),
            "{name}"
        );
    }

    // The WASI packages are those of the wasmtime-wasi-http the host links,
    // found in the registry this build used.
    let lock = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.lock"))
        .unwrap();
    let version = lock
        .split("[[package]]")
        .find(|p| p.contains("name = \"wasmtime-wasi-http\""))
        .and_then(|p| p.lines().find_map(|l| l.strip_prefix("version = \"")))
        .map(|v| v.trim_end_matches('"').to_owned())
        .expect("wasmtime-wasi-http in Cargo.lock");
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| dirs::home_dir().unwrap().join(".cargo"));
    let registry = cargo_home.join("registry/src");
    let served = std::fs::read_dir(&registry)
        .unwrap()
        .map(|e| {
            e.unwrap()
                .path()
                .join(format!("wasmtime-wasi-http-{version}/wit/deps"))
        })
        .find(|p| p.is_dir())
        .unwrap_or_else(|| {
            panic!(
                "wasmtime-wasi-http {version} is not in {}",
                registry.display()
            )
        });
    assert_eq!(names(&out.join("deps")), names(&served));
    for name in names(&served) {
        assert_eq!(
            std::fs::read_to_string(out.join("deps").join(&name)).unwrap(),
            std::fs::read_to_string(served.join(&name)).unwrap(),
            "deps/{name}"
        );
    }
}

#[test]
fn plugin_new_refuses_a_bad_name_and_a_non_empty_directory() {
    let (sb, cli) = (Sandbox::new(), Cli::new());
    let o = cli.run(
        sb.root.path(),
        &["plugin", "new", "Bad Name", "--lang", "python"],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    has(&text(&o), "not a valid plugin name");

    let dir = sb.ws();
    let o = cli.run(
        sb.root.path(),
        &[
            "plugin",
            "new",
            "x",
            "--lang",
            "js",
            "--dir",
            dir.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    has(&text(&o), "is not empty");
    assert_eq!(
        std::fs::read_to_string(dir.join("hello.txt")).unwrap(),
        "hello from the workspace\n"
    );
}
