//! Python packages from PyPI: `uvx PKG`, `pipx run PKG` and `python -m
//! MODULE` entries. pip installs the package and what it needs into the
//! staging directory (`pip install --target`), wheels only, so that no
//! package's own code runs to build it; the server then runs as the same
//! interpreter with the installed directory on `PYTHONPATH`, the program
//! the launcher would have run found from the package's `console_scripts`.

use super::{
    Fetched, Installed, McpInstallError, SYSTEM_PATH, Staging, failed, installer, run_installer,
};
use crate::exec::{Destination, Launch, Network};
use crate::manifest::PackageStore;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// PyPI's index and the host of its files: the destinations an install
/// may reach (pip reads the proxy variables the confined path sets).
pub(super) const ORIGINS: &[&str] = &["https://pypi.org:443", "https://files.pythonhosted.org:443"];

/// `[--from PKG] PROGRAM ARGS…` after `uvx` (`from` is `--from`), or after
/// `pipx run` (`--spec`).
pub(super) fn named(rest: &[String], launcher: &'static str, from: &str) -> Option<Fetched> {
    let mut words = rest.iter();
    let mut spec = None;
    let program = loop {
        let word = words.next()?;
        match word.as_str() {
            w if w == from => spec = Some(words.next()?.clone()),
            w if w.starts_with('-') => return None,
            w => break w.to_owned(),
        }
    };
    let (spec, program) = match spec {
        Some(spec) => (spec, Some(program)),
        None => (program, None),
    };
    // A URL, a path or a git source is not a package of the index.
    if spec.contains(['/', ':', '\\']) {
        return None;
    }
    Some(Fetched {
        store: PackageStore::Pypi,
        launcher,
        spec,
        program,
        args: words.cloned().collect(),
    })
}

/// `-m MODULE ARGS…` after `python`: the package of the index named as the
/// module (a dotted module, such as the standard library's `http.server`,
/// is left as it is).
pub(super) fn module(rest: &[String]) -> Option<Fetched> {
    let (flag, rest) = rest.split_first()?;
    let (module, args) = rest.split_first()?;
    let plain = !module.is_empty()
        && module
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_');
    (flag == "-m" && plain).then(|| Fetched {
        store: PackageStore::Pypi,
        launcher: "python -m",
        spec: module.clone(),
        program: Some(module.clone()),
        args: args.to_vec(),
    })
}

/// The requirement pip reads: uvx's `NAME@VERSION` as `NAME==VERSION`.
pub(super) fn pip_spec(spec: &str) -> String {
    match spec.split_once('@') {
        Some((name, version)) => format!("{name}=={version}"),
        None => spec.to_owned(),
    }
}

/// A name as PyPI compares them: lowercase, each run of `-`, `_`, `.` one `-`.
fn normalized(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !out.ends_with('-') {
                out.push('-');
            }
        } else {
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

/// Installs `package` from PyPI into the store (see the module docs).
pub(super) fn install(package: &Fetched) -> Result<Installed, McpInstallError> {
    let spec = &package.spec;
    let python = installer(spec, "python3", "install Python 3 with pip")?;
    let stage = Staging::new()?;
    let interpreter = interpreter(&python, &stage)?;
    let destinations = ORIGINS
        .iter()
        .map(|o| Destination::parse(o))
        .collect::<Result<Vec<_>, _>>()?;
    let launch = Launch::new(&interpreter, &stage.dir)
        .named("pip install")
        .args(["-m", "pip", "install", "--target"])
        .arg(&stage.dir)
        .args([
            "--only-binary=:all:",
            "--no-input",
            "--disable-pip-version-check",
            "--no-warn-script-location",
            "--quiet",
            &pip_spec(spec),
        ])
        .env("HOME", &stage.home)
        .env("PIP_CACHE_DIR", stage.home.join("cache"))
        .env("PYTHONNOUSERSITE", "1")
        .env("PATH", SYSTEM_PATH)
        .network(Network::Only(destinations))
        .strict(
            std::slice::from_ref(&stage.dir),
            Some(&interpreter),
            None,
            &stage.dir,
        )
        .writable(&stage.dir);
    let out = run_installer(launch, spec)?;
    if out.exit_code != Some(0) {
        let mut why = failed("pip", spec, &out);
        if let McpInstallError::Failed { source_only, .. } = &mut why {
            *source_only = out.stderr.contains("No matching distribution");
        }
        return Err(why);
    }
    let wanted = normalized(package.name());
    let (name, version, info) =
        distribution(&stage.dir, &wanted).ok_or_else(|| McpInstallError::NoRecord {
            spec: spec.clone(),
            wanted: wanted.clone(),
            dir: stage.dir.clone(),
        })?;
    let run = match &package.program {
        Some(module) if package.launcher == "python -m" => Run::Module(module.clone()),
        named => {
            let script = named.clone().unwrap_or_else(|| package.name().to_owned());
            entry_point(&info, &script).ok_or_else(|| McpInstallError::NoScript {
                spec: spec.clone(),
                script: script.clone(),
            })?
        }
    };
    let (dir, package) = stage.into_store(PackageStore::Pypi, &name, version)?;
    let mut command = vec![interpreter.display().to_string()];
    command.extend(run.args(&dir));
    Ok(Installed {
        command,
        env: vec![("PYTHONPATH".to_owned(), dir.display().to_string())],
        package,
    })
}

/// The interpreter `python3` is (a shim's or a link's target), asked of it
/// through the confined path: the entry runs that one, whose version the
/// wheels were chosen for. Like pip after it, it reads only the system's
/// directories, its own install and the staging directory (an interpreter
/// in a home directory is readable so, where the home is not).
fn interpreter(python: &Path, stage: &Staging) -> Result<PathBuf, McpInstallError> {
    let out = Launch::new(python, &stage.dir)
        .named("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .env("HOME", &stage.home)
        .env("PATH", SYSTEM_PATH)
        .strict(
            std::slice::from_ref(&stage.dir),
            Some(python),
            None,
            &stage.dir,
        )
        .writable(&stage.home)
        .timeout(Duration::from_secs(60))
        .run_blocking()
        .map_err(|e| McpInstallError::Run {
            program: python.to_path_buf(),
            why: e.to_string(),
        })?;
    let path = PathBuf::from(out.stdout.trim());
    if out.exit_code != Some(0) || !path.is_absolute() {
        return Err(McpInstallError::Interpreter {
            program: python.to_path_buf(),
            exit: out.exit_code,
            stderr: out.stderr,
        });
    }
    Ok(path)
}

/// The installed distribution named `wanted` (normalized): its name as
/// normalized, its version and its `.dist-info` directory.
fn distribution(dir: &Path, wanted: &str) -> Option<(String, String, PathBuf)> {
    std::fs::read_dir(dir).ok()?.flatten().find_map(|entry| {
        let info = entry.path();
        entry.file_name().to_str()?.strip_suffix(".dist-info")?;
        let metadata = std::fs::read_to_string(info.join("METADATA")).ok()?;
        let field = |key: &str| {
            metadata
                .lines()
                .take_while(|l| !l.is_empty())
                .find_map(|l| l.strip_prefix(key).map(str::trim))
        };
        let name = normalized(field("Name:")?);
        let version = field("Version:")?.to_owned();
        (name == wanted).then_some((name, version, info))
    })
}

/// What the interpreter runs.
#[derive(Debug, PartialEq, Eq)]
enum Run {
    /// `-m MODULE`.
    Module(String),
    /// A console script's `MODULE:FUNCTION` (or `MODULE:OBJECT.METHOD`).
    Call(String, String),
}

impl Run {
    /// The interpreter's arguments: `-m MODULE` when that runs the program
    /// (the module, or a package whose `__main__.py` the program is the
    /// `main` of), else the console script's own call, as its wrapper does.
    fn args(&self, dir: &Path) -> Vec<String> {
        match self {
            Run::Module(module) => vec!["-m".to_owned(), module.clone()],
            Run::Call(module, function)
                if function == "main"
                    && dir
                        .join(module.replace('.', "/"))
                        .join("__main__.py")
                        .is_file() =>
            {
                vec!["-m".to_owned(), module.clone()]
            }
            Run::Call(module, function) => {
                let head = function.split('.').next().unwrap_or(function);
                vec![
                    "-c".to_owned(),
                    format!("import sys; from {module} import {head}; sys.exit({function}())"),
                ]
            }
        }
    }
}

/// The console script `script` of the distribution whose `.dist-info` is
/// `info`: what its `entry_points.txt` has it run.
fn entry_point(info: &Path, script: &str) -> Option<Run> {
    let text = std::fs::read_to_string(info.join("entry_points.txt")).ok()?;
    let mut section = "";
    for line in text.lines().map(str::trim) {
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name;
            continue;
        }
        let Some((key, target)) = line.split_once('=') else {
            continue;
        };
        if section != "console_scripts" || key.trim() != script {
            continue;
        }
        // `module:function [extra]`: extras name optional dependencies.
        let target = target.split('[').next().unwrap_or(target).trim();
        let ok = |s: &str| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
        };
        return match target.split_once(':') {
            Some((m, f)) if ok(m.trim()) && ok(f.trim()) => {
                Some(Run::Call(m.trim().to_owned(), f.trim().to_owned()))
            }
            None if ok(target) => Some(Run::Module(target.to_owned())),
            _ => None,
        };
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_console_script_is_found_in_entry_points() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("entry_points.txt"),
            "[console_scripts]\nmcp-server-fetch = mcp_server_fetch:main\nother = x.y:App.run [cli]\n\n[gui_scripts]\ng = z:w\n",
        )
        .unwrap();
        assert_eq!(
            entry_point(dir.path(), "mcp-server-fetch"),
            Some(Run::Call("mcp_server_fetch".into(), "main".into()))
        );
        let other = entry_point(dir.path(), "other").unwrap();
        assert_eq!(
            other.args(dir.path()),
            vec![
                "-c".to_owned(),
                "import sys; from x.y import App; sys.exit(App.run())".to_owned()
            ]
        );
        assert_eq!(entry_point(dir.path(), "g"), None);
        assert_eq!(normalized("Mcp_Server..Fetch"), "mcp-server-fetch");
    }
}
