//! Progress of slow work a command waits for: compiling a plugin that is
//! in no cache (seconds for a large Python or JavaScript component).
//!
//! Nothing is reported for work that ends within [`QUIET`]; past it (or [`QUIET_VAR`]), the
//! front-end's sink (see [`set_sink`]) gets a [`Progress::Started`] line,
//! and a [`Progress::Finished`] one when the work ends, so no command sits
//! on a blank screen. Without a sink the lines go to the log at `info`.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

/// How long work may take before it is reported.
pub const QUIET: Duration = Duration::from_millis(200);

/// The environment variable that sets another [`QUIET`], in milliseconds
/// (`0` reports all work; for tests and for the curious).
pub const QUIET_VAR: &str = "CORRAL_PROGRESS_AFTER_MS";

fn quiet() -> Duration {
    std::env::var(QUIET_VAR)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .map_or(QUIET, Duration::from_millis)
}

/// One step of slow work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// Work that has taken longer than [`QUIET`] and goes on.
    Started {
        /// The plugin being compiled, as the manifest names it.
        plugin: String,
        /// Why a built-in is compiled at all, when it is one.
        why: Option<String>,
    },
    /// The end of work reported by [`Progress::Started`].
    Finished {
        /// The plugin.
        plugin: String,
        /// How long it took in all.
        elapsed: Duration,
    },
}

impl std::fmt::Display for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = |p: &str| crate::terminal::visible(p);
        match self {
            Progress::Started { plugin, why: None } => write!(
                f,
                "compiling plugin `{}` for its first use (later runs load it from the compile cache)…",
                name(plugin)
            ),
            Progress::Started {
                plugin,
                why: Some(why),
            } => write!(
                f,
                "compiling built-in plugin `{}` ({}; later runs load it from the compile cache)…",
                name(plugin),
                crate::terminal::visible(why)
            ),
            Progress::Finished { plugin, elapsed } => {
                write!(f, "compiled plugin `{}` in {elapsed:.1?}", name(plugin))
            }
        }
    }
}

/// Where progress goes.
pub type Sink = Arc<dyn Fn(&Progress) + Send + Sync>;

static SINK: RwLock<Option<Sink>> = RwLock::new(None);

/// Sets where progress goes from now on (the terminal, the UI's notices, an
/// MCP client): one process has one front-end at a time, and a front-end
/// that takes over the terminal replaces the line-mode sink.
pub fn set_sink(sink: Sink) {
    if let Ok(mut s) = SINK.write() {
        *s = Some(sink);
    }
}

fn report(progress: &Progress) {
    let sink = SINK.read().ok().and_then(|s| s.clone());
    match sink {
        Some(sink) => sink(progress),
        None => tracing::info!("{progress}"),
    }
}

/// Watches one piece of work from [`Watch::start`] until it is dropped.
pub(crate) struct Watch {
    done: Option<mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watch {
    /// Starts watching the compile of `plugin`; `why` says why a built-in
    /// is compiled.
    pub(crate) fn start(plugin: &str, why: Option<String>) -> Self {
        let (done, wait) = mpsc::channel::<()>();
        let plugin = plugin.to_owned();
        let started = Instant::now();
        let quiet = quiet();
        let thread = std::thread::Builder::new()
            .name("corral-progress".into())
            .spawn(move || {
                let wake = if quiet.is_zero() {
                    Err(RecvTimeoutError::Timeout)
                } else {
                    wait.recv_timeout(quiet)
                };
                if wake != Err(RecvTimeoutError::Timeout) {
                    return;
                }
                report(&Progress::Started {
                    plugin: plugin.clone(),
                    why,
                });
                let _ = wait.recv();
                report(&Progress::Finished {
                    plugin,
                    elapsed: started.elapsed(),
                });
            })
            .ok();
        Self {
            done: Some(done),
            thread,
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        // Closing the channel ends the wait either way; joining keeps the
        // "finished" line before whatever the command prints next.
        self.done.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
