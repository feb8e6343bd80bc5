//! The Landlock rules of a run: read everywhere but the user's credentials
//! and corral's own data, write beneath the workspace and a private temp
//! directory, and TCP only with `network`.

use std::path::{Path, PathBuf};

/// Credentials in the user's home, by path relative to it. A program may
/// read the rest of the system (toolchains need it), not these.
const SECRETS_IN_HOME: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".config/gh",
    ".kube",
    ".docker",
    ".netrc",
    ".git-credentials",
    ".password-store",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".npmrc",
    ".pypirc",
];

/// The system's own credentials, which a program run by root could read:
/// password hashes, sudo rules, SSH host keys (the private ones, by
/// prefix in `/etc/ssh`).
const SYSTEM_SECRETS: &[&str] = &[
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/security/opasswd",
];

/// What programs may not read: [`SECRETS_IN_HOME`], [`SYSTEM_SECRETS`],
/// root's home (unless it is the user's, whose toolchains live there), and
/// corral's own state ([`crate::state`]: the configuration, which decides
/// what runs, the session logs, which hold whatever was said, the trust
/// store, the journal, the caches), those that exist, by their canonical
/// paths.
pub(super) fn secret_paths() -> Vec<PathBuf> {
    // $HOME as set, and the home the system knows, if they differ.
    let mut homes: Vec<PathBuf> = std::env::var_os("HOME")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    homes.extend(dirs::home_dir());
    let mut paths: Vec<PathBuf> = homes
        .iter()
        .flat_map(|h| SECRETS_IN_HOME.iter().map(move |rel| h.join(rel)))
        .collect();
    // The same stores where the environment moves them.
    if let Some(cargo) = std::env::var_os("CARGO_HOME").map(PathBuf::from) {
        paths.extend([cargo.join("credentials"), cargo.join("credentials.toml")]);
    }
    if let Some(config) = dirs::config_dir() {
        paths.extend([config.join("gh"), config.join("gcloud")]);
    }
    for var in ["GNUPGHOME", "DOCKER_CONFIG", "AWS_SHARED_CREDENTIALS_FILE"] {
        paths.extend(std::env::var_os(var).map(PathBuf::from));
    }
    paths.extend(SYSTEM_SECRETS.iter().map(PathBuf::from));
    paths.extend(ssh_host_keys());
    let root_home = Path::new("/root");
    if !homes.iter().any(|h| h.starts_with(root_home)) {
        paths.push(root_home.to_path_buf());
    }
    let mut out: Vec<PathBuf> = paths.iter().filter_map(|p| p.canonicalize().ok()).collect();
    // Made first when missing: see `state::user_dirs_made`.
    out.extend(crate::state::user_dirs_made());
    out.sort();
    out.dedup();
    out
}

/// The private SSH host keys in `/etc/ssh` (`ssh_host_*_key`, not the
/// `.pub` beside them).
fn ssh_host_keys() -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir("/etc/ssh") else {
        return Vec::new();
    };
    entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("ssh_host_") && n.ends_with("_key"))
        })
        .collect()
}

/// Paths whose subtrees together cover the whole file system except
/// `denied`: the entries of `/`, descending only into the directories on
/// the way to a denied path. Symlinks get no rule of their own; what they
/// point to is judged where it lies.
fn readable_except(denied: &[PathBuf]) -> Vec<PathBuf> {
    cover(Path::new("/"), denied)
}

/// [`readable_except`] below `root`.
fn cover(root: &Path, denied: &[PathBuf]) -> Vec<PathBuf> {
    fn visit(dir: &Path, denied: &[PathBuf], out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_symlink() || denied.contains(&path) {
                continue;
            }
            if kind.is_dir() && denied.iter().any(|d| d.starts_with(&path)) {
                visit(&path, denied, out);
            } else {
                out.push(path);
            }
        }
    }
    if !denied.iter().any(|d| d.starts_with(root)) {
        return vec![root.to_path_buf()];
    }
    let mut out = Vec::new();
    visit(root, denied, &mut out);
    out.sort();
    out
}

/// Reads everywhere but [`secret_paths`] (or only beneath `readable` when
/// given, secrets still left out), everything beneath `writable`,
/// `/dev/null`, and TCP: none when `network` is off, connect to the
/// proxy's port only when it names destinations.
pub(super) fn landlock_ruleset(
    writable: &[&Path],
    network: &super::Network,
    readable: Option<&[PathBuf]>,
) -> Result<landlock::RulesetCreated, landlock::RulesetError> {
    use landlock::{
        ABI, Access, AccessFs, AccessNet, NetPort, Ruleset, RulesetAttr, RulesetCreatedAttr, Scope,
        path_beneath_rules,
    };
    // Best effort: what this kernel's Landlock lacks is left out. On 6.12
    // and later the program cannot signal processes outside its sandbox
    // (corral among them) nor reach abstract UNIX sockets; on 7.1 and later
    // it cannot connect to named UNIX sockets outside the workspace and its
    // temp directory (before that the seccomp filter refuses UNIX sockets).
    let abi = ABI::V10;
    let secrets = secret_paths();
    let mut ruleset = Ruleset::default()
        .handle_access(AccessFs::from_all(abi))?
        .scope(Scope::from_all(abi))?;
    if !matches!(network, super::Network::Any) {
        ruleset = ruleset.handle_access(AccessNet::from_all(abi))?;
    }
    let mut created = ruleset.create()?;
    if matches!(network, super::Network::Only(_)) {
        // The proxy's port, the one thing in the program's namespace; no bind.
        created = created.add_rule(NetPort::new(
            super::netns::PROXY_PORT,
            AccessNet::ConnectTcp,
        ))?;
    }
    created
        .add_rules(path_beneath_rules(
            match readable {
                Some(dirs) => dirs.iter().flat_map(|d| cover(d, &secrets)).collect(),
                None => readable_except(&secrets),
            },
            AccessFs::from_read(abi),
        ))?
        // A secret beneath a writable directory (a workspace that is the
        // home directory, say) stays out: the rule covers the rest of it.
        .add_rules(path_beneath_rules(
            writable.iter().flat_map(|w| cover(w, &secrets)),
            AccessFs::from_all(abi),
        ))?
        .add_rules(path_beneath_rules(["/dev/null"], AccessFs::from_file(abi)))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_readable_cover_leaves_out_only_the_secrets() {
        use super::cover;
        let root = tempfile::tempdir().expect("tempdir");
        let r = root.path();
        for dir in ["etc", "home/.ssh", "home/.cargo/registry", "home/src"] {
            std::fs::create_dir_all(r.join(dir)).expect("mkdir");
        }
        for file in [
            "home/.profile",
            "home/.cargo/credentials.toml",
            "home/.ssh/id_rsa",
        ] {
            std::fs::write(r.join(file), "x").expect("write");
        }
        std::os::unix::fs::symlink(r.join("home/.ssh"), r.join("home/keys")).expect("symlink");
        let denied = [r.join("home/.ssh"), r.join("home/.cargo/credentials.toml")];
        let got: Vec<String> = cover(r, &denied)
            .iter()
            .map(|p| p.strip_prefix(r).expect("under root").display().to_string())
            .collect();
        // Everything but the two secrets and the symlink to one of them;
        // the directories on the way are covered by their other entries.
        assert_eq!(
            got,
            ["etc", "home/.cargo/registry", "home/.profile", "home/src"]
        );
        // Nothing denied below a root: the root itself.
        assert_eq!(cover(&r.join("etc"), &denied), [r.join("etc")]);
    }
}
