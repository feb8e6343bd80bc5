//! `corral:plugin/process`: programs run for plugins granted `exec`, and only
//! in calls whose tool declares `execute` (see `effects`). The checks and the
//! confinement live in [`crate::exec`]; this file only maps between the WIT
//! types and that module.

use super::bindings::process::{self, Command, Host, Output, ProcessError};
use super::store::CallState;
use crate::exec::ExecError;
use wasmtime::component::{HasSelf, Linker};

/// Adds `corral:plugin/process`. Every plugin may import it: for one
/// without `grants.exec` each run is `not-granted`, naming the manifest
/// entry, and so is each run in a call whose tool does not declare
/// `execute`.
pub(super) fn add_to_linker(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    process::add_to_linker::<CallState, HasSelf<CallState>>(linker, |s| s)
}

impl Host for CallState {
    async fn run(&mut self, command: Command) -> Result<Output, ProcessError> {
        // Without grants.exec this interface is a stub: declaring `execute`
        // would not help, so the missing grant is what the plugin is told.
        let Some(exec) = self.plugin.exec.clone() else {
            let name = &self.plugin.name;
            let why = format!(
                "not granted: this plugin (`{name}`) has no grants.exec entry in [plugins.{name}] ({}); \
                 add grants.exec = [{{ program = \"NAME\", args = [\"**\"] }}] to [plugins.{name}] \
                 to let it run programs",
                self.plugin.origin
            );
            tracing::warn!(target: "corral::exec", "refused {:?}: {why}", command.program);
            return Err(ProcessError::NotGranted(why));
        };
        // Grants say which programs the plugin may ever run, the call's
        // declared effects whether this call may run any.
        if let Err(why) = self.caps.process(&self.plugin.name) {
            tracing::warn!(target: "corral::exec", "refused {:?}: {why}", command.program);
            return Err(ProcessError::NotGranted(why));
        }
        // A tool that reads by running programs gets them with the
        // workspace read-only (see `CallCaps::programs_read_only`).
        let reads_by_running = self.caps.programs_read_only();
        let exec = if reads_by_running {
            std::sync::Arc::new(crate::exec::Exec {
                read_only: true,
                ..(*exec).clone()
            })
        } else {
            exec
        };
        // Recorded before it runs: a run that fails half-way may still
        // have fetched something.
        self.touched.program(super::touched::ProgramRun {
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
                plugin = &*self.plugin.name,
                "ran `{shown}`: exit {:?}{} in {:.1?}",
                out.exit_code,
                if out.timed_out { " (timed out)" } else { "" },
                started.elapsed()
            ),
            Err(e) => {
                tracing::warn!(target: "corral::exec", plugin = &*self.plugin.name, "refused `{shown}`: {e}")
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
