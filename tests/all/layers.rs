//! The layering of the host's crates, checked from their sources and from
//! `cargo metadata`: the crates depend on each other only downwards, no
//! front-end depends on the runtime crate, and inside each crate the
//! top-level modules import each other without a cycle (so the core can
//! be read, and split further, from the bottom up).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The host's crates, bottom to top: each may depend only on crates before
/// it (`corral` is the binary package, the top).
const LAYERS: &[&str] = &[
    "corral-protocol",
    "corral-exec",
    "corral-policy",
    "corral-manifest",
    "corral-runtime",
    "corral-core",
    "corral-tui",
    "corral-mcp",
    "corral-acp",
    "corral",
];

/// The crates a front-end may depend on.
const FRONT_ENDS: &[(&str, &[&str])] = &[
    ("corral-tui", &["corral-core", "corral-protocol"]),
    ("corral-mcp", &["corral-core", "corral-protocol"]),
    ("corral-acp", &["corral-core", "corral-protocol"]),
    (
        "corral",
        &[
            "corral-core",
            "corral-protocol",
            "corral-tui",
            "corral-mcp",
            "corral-acp",
        ],
    ),
];

fn host_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every crate root under `host/`: `host/src/{lib,main}.rs` and
/// `host/*/src/lib.rs`.
fn crate_roots() -> Vec<PathBuf> {
    let host = host_dir();
    let mut roots: Vec<PathBuf> = ["src/lib.rs", "src/main.rs"]
        .iter()
        .map(|r| host.join(r))
        .filter(|p| p.is_file())
        .collect();
    for entry in std::fs::read_dir(&host).expect("host dir") {
        let lib = entry.expect("entry").path().join("src/lib.rs");
        if lib.is_file() {
            roots.push(lib);
        }
    }
    roots.sort();
    roots
}

/// The top-level modules a crate root declares (`mod x;`, `pub mod x;`).
fn top_modules(root: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(root).expect("crate root");
    text.lines()
        .filter_map(|line| {
            let line = line.trim();
            let rest = line
                .strip_prefix("pub mod ")
                .or_else(|| line.strip_prefix("pub(crate) mod "))
                .or_else(|| line.strip_prefix("mod "))?;
            rest.strip_suffix(';').map(|name| name.trim().to_owned())
        })
        .collect()
}

/// The source files of module `name` of the crate whose `src` is `src`.
fn module_files(src: &Path, name: &str) -> Vec<PathBuf> {
    let mut files = vec![];
    let file = src.join(format!("{name}.rs"));
    if file.is_file() {
        files.push(file);
    }
    let mut dirs = vec![src.join(name)];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files
}

/// The top-level modules `text` names through `crate::…` paths, outside
/// its unit tests (a test may reach up: it is not part of the layering).
fn referenced(text: &str) -> BTreeSet<String> {
    let code = match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => &text[..at],
        None => text,
    };
    let mut names = BTreeSet::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + "crate::".len()..];
        // `corral_crate::x` or `my_crate::x` is another path, not `crate::`.
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                names.insert(ident(item.trim()));
            }
        } else {
            names.insert(ident(rest));
        }
    }
    names.retain(|n| !n.is_empty());
    names
}

fn ident(text: &str) -> String {
    text.chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// A cycle of `graph`, as the modules along it, if it has one.
fn cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        done: &mut BTreeSet<String>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut found = path[at..].to_vec();
            found.push(node.to_owned());
            return Some(found);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(found) = visit(next, graph, done, path) {
                return Some(found);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut done, &mut vec![]))
}

#[test]
fn no_crate_has_an_import_cycle_between_its_top_level_modules() {
    let roots = crate_roots();
    assert!(!roots.is_empty(), "no crate root under {:?}", host_dir());
    let mut cycles = vec![];
    for root in &roots {
        let src = root.parent().expect("src");
        let modules = top_modules(root);
        let graph: BTreeMap<String, BTreeSet<String>> = modules
            .iter()
            .map(|m| {
                let mut deps = BTreeSet::new();
                for file in module_files(src, m) {
                    let text = std::fs::read_to_string(&file).expect("source");
                    deps.extend(referenced(&text));
                }
                deps.retain(|d| d != m && modules.contains(d));
                (m.clone(), deps)
            })
            .collect();
        if let Some(found) = cycle(&graph) {
            cycles.push(format!("{}: {}", root.display(), found.join(" → ")));
        }
    }
    assert!(
        cycles.is_empty(),
        "import cycles between top-level modules (move the shared data type down, \
         into the lower module or crate):\n{}",
        cycles.join("\n")
    );
}

#[test]
fn crates_depend_only_downwards_and_front_ends_not_on_the_runtime() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = crate::support::process::run_ok(
        std::process::Command::new(cargo)
            .args([
                "metadata",
                "--format-version",
                "1",
                "--offline",
                "--no-deps",
            ])
            .current_dir(host_dir()),
        "cargo metadata",
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("metadata json");
    // Normal and build dependencies on other corral crates; dev-dependencies
    // (tests, benches) may reach any layer.
    let deps: BTreeMap<String, BTreeSet<String>> = meta["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .map(|p| {
            let on = p["dependencies"]
                .as_array()
                .expect("dependencies")
                .iter()
                .filter(|d| d["kind"].as_str() != Some("dev"))
                .filter_map(|d| d["name"].as_str())
                .filter(|n| n.starts_with("corral"))
                .map(str::to_owned)
                .collect();
            (p["name"].as_str().expect("name").to_owned(), on)
        })
        .collect();
    let mut wrong = vec![];
    for (i, name) in LAYERS.iter().enumerate() {
        let Some(on) = deps.get(*name) else {
            wrong.push(format!("there is no crate `{name}`"));
            continue;
        };
        for dep in on {
            if let Some(j) = LAYERS.iter().position(|l| l == dep)
                && j >= i
            {
                wrong.push(format!("`{name}` depends on `{dep}`, a layer above it"));
            }
        }
    }
    for (front, allowed) in FRONT_ENDS {
        for dep in deps.get(*front).into_iter().flatten() {
            if !allowed.contains(&dep.as_str()) {
                wrong.push(format!(
                    "front-end `{front}` depends on `{dep}` (it may use only {allowed:?})"
                ));
            }
        }
    }
    for (name, on) in &deps {
        for (front, _) in FRONT_ENDS {
            if on.contains(*front) && name != "corral" {
                wrong.push(format!("`{name}` depends on the front-end `{front}`"));
            }
        }
    }
    assert!(wrong.is_empty(), "crate layering:\n{}", wrong.join("\n"));
}
