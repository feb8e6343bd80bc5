//! Where `corral plugin add` writes, and a real OCI registry on loopback to
//! publish to and install from.

use crate::*;
use std::net::TcpListener;
use std::process::Child;

fn user_manifest(cli: &Cli) -> PathBuf {
    cli.home.path().join("config/corral/corral.toml")
}

pub fn read_user_manifest(cli: &Cli) -> String {
    std::fs::read_to_string(user_manifest(cli)).unwrap_or_default()
}

pub fn store_dir(cli: &Cli) -> PathBuf {
    cli.home.path().join("data/corral/plugins")
}

/// A real OCI registry (distribution v2) on a loopback port, storing its
/// blobs in a temp dir; stopped when dropped.
pub struct Registry {
    child: Child,
    port: u16,
    storage: tempfile::TempDir,
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Registry {
    /// `None` (after saying why) when no registry binary is available.
    pub fn start() -> Option<Self> {
        let binary = std::env::var("CORRAL_TEST_REGISTRY").ok().or_else(|| {
            ["/usr/bin/docker-registry", "/usr/sbin/docker-registry"]
                .into_iter()
                .find(|p| Path::new(p).exists())
                .map(str::to_owned)
        });
        let Some(binary) = binary else {
            crate::support::skip::missing(
                "no OCI registry binary (CORRAL_TEST_REGISTRY is unset and there is no \
                 /usr/bin/docker-registry)",
                "apt-get install docker-registry",
            );
            return None;
        };
        let storage = tempfile::tempdir().unwrap();
        let port = {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let config = storage.path().join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:{port}\n",
                storage.path().join("data").display()
            ),
        )
        .unwrap();
        let child = std::process::Command::new(&binary)
            .arg("serve")
            .arg(&config)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("start {binary}: {e}"));
        let registry = Registry {
            child,
            port,
            storage,
        };
        for _ in 0..200 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Some(registry);
            }
            std::thread::sleep(std::time::Duration::from_millis(25));
        }
        panic!("the registry did not start on port {port}");
    }

    pub fn reference(&self, repo_tag: &str) -> String {
        format!("oci://127.0.0.1:{}/{repo_tag}", self.port)
    }

    /// Every stored blob file.
    pub fn blobs(&self) -> Vec<PathBuf> {
        fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
            for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let p = e.path();
                if p.is_dir() {
                    walk(&p, out);
                } else if p.file_name().is_some_and(|n| n == "data") {
                    out.push(p);
                }
            }
        }
        let mut out = Vec::new();
        walk(
            &self.storage.path().join("data/docker/registry/v2/blobs"),
            &mut out,
        );
        out
    }
}

/// `corral plugin publish WASM REFERENCE --requests REQUESTS`, which must
/// succeed.
pub fn publish(cli: &Cli, sb: &Sandbox, wasm: &str, reference: &str, requests: &str) {
    let o = cli.run(
        &sb.ws(),
        &["plugin", "publish", wasm, reference, "--requests", requests],
    );
    assert!(
        o.status.success(),
        "{}",
        crate::support::output::printed(&o)
    );
}
