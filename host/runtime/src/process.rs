//! `corral:plugin/process`: programs run for plugins granted `exec`, and only
//! in calls whose tool declares `execute` (see `effects`). The checks and the
//! confinement live in [`crate::exec`]; this file only maps between the WIT
//! types and that module.

use super::bindings::process::{self, Command, Host, Output, ProcessError};
use super::effects::CallCaps;
use super::touched::{ProgramRun, Recording};
use crate::exec::{Exec, ExecError};
use std::sync::Arc;
use wasmtime::component::{HasData, Linker};

/// What `corral:plugin/process` sees of a call: its plugin's `exec` grant,
/// what the call may do, and where the programs it runs are recorded.
pub(crate) struct ProcessView<'a> {
    /// The programs the plugin may run; `None` without `grants.exec`.
    pub(crate) exec: Option<&'a Arc<Exec>>,
    /// The plugin's name.
    pub(crate) plugin: &'a str,
    /// Where its manifest entry is, for the denial without a grant.
    pub(crate) origin: &'a str,
    /// What this call may use of the grant.
    pub(crate) caps: &'a CallCaps,
    /// What the call touched.
    pub(crate) touched: &'a mut Recording,
}

/// The data `corral:plugin/process` is served from: a [`ProcessView`].
struct ProcessData;

impl HasData for ProcessData {
    type Data<'a> = ProcessView<'a>;
}

/// Adds `corral:plugin/process`. Every plugin may import it: for one
/// without `grants.exec` each run is `not-granted`, naming the manifest
/// entry, and so is each run in a call whose tool does not declare
/// `execute`.
pub(super) fn add_to_linker<T: Send + 'static>(
    linker: &mut Linker<T>,
    get: fn(&mut T) -> ProcessView<'_>,
) -> wasmtime::Result<()> {
    process::add_to_linker::<T, ProcessData>(linker, get)
}

impl Host for ProcessView<'_> {
    async fn run(&mut self, command: Command) -> Result<Output, ProcessError> {
        // Without grants.exec this interface is a stub: declaring `execute`
        // would not help, so the missing grant is what the plugin is told.
        let Some(exec) = self.exec.cloned() else {
            let name = self.plugin;
            let why = format!(
                "not granted: this plugin (`{name}`) has no grants.exec entry in [plugins.{name}] ({}); \
                 add grants.exec = [{{ program = \"NAME\", args = [\"**\"] }}] to [plugins.{name}] \
                 to let it run programs",
                self.origin
            );
            tracing::warn!(target: "corral::exec", "refused {:?}: {why}", command.program);
            return Err(ProcessError::NotGranted(why));
        };
        // Grants say which programs the plugin may ever run, the call's
        // declared effects whether this call may run any.
        if let Err(why) = self.caps.process(self.plugin) {
            let why = why.to_string();
            tracing::warn!(target: "corral::exec", "refused {:?}: {why}", command.program);
            return Err(ProcessError::NotGranted(why));
        }
        // A tool that reads by running programs gets them with the
        // workspace read-only (see `CallCaps::programs_read_only`).
        let reads_by_running = self.caps.programs_read_only();
        let exec = if reads_by_running {
            Arc::new(Exec {
                read_only: true,
                ..(*exec).clone()
            })
        } else {
            exec
        };
        // Recorded before it runs: a run that fails half-way may still
        // have fetched something.
        self.touched.program(ProgramRun {
            program: command.program.clone(),
            args: command.args.clone(),
            network: exec
                .grant_for(&command.program, &command.args)
                .is_some_and(|g| g.network.reaches()),
        });
        let started = std::time::Instant::now();
        let result = exec
            .run(
                &command.program,
                &command.args,
                command.cwd.as_deref(),
                command.timeout_ms,
            )
            .await;
        let shown = format!("{} {}", command.program, command.args.join(" "));
        match &result {
            Ok(out) => tracing::info!(
                target: "corral::exec",
                plugin = self.plugin,
                "ran `{shown}`: exit {:?}{} in {:.1?}",
                out.exit_code,
                if out.timed_out { " (timed out)" } else { "" },
                started.elapsed()
            ),
            Err(e) => {
                tracing::warn!(target: "corral::exec", plugin = self.plugin, "refused `{shown}`: {e}")
            }
        }
        match result {
            Ok(o) => Ok(Output {
                exit_code: o.exit_code,
                stdout: o.stdout,
                stderr: o.stderr,
                truncated: o.truncated,
                timed_out: o.timed_out,
            }),
            Err(ExecError::NotGranted(m)) => Err(ProcessError::NotGranted(m)),
            Err(ExecError::Invalid(m)) => Err(ProcessError::Invalid(m)),
            Err(ExecError::SpawnFailed(m)) => Err(ProcessError::SpawnFailed(m)),
        }
    }
}
