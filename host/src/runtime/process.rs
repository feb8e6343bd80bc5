//! `corral:plugin/process`: programs run for plugins granted `exec`, and only
//! in calls whose tool declares `execute` (see `effects`). The checks and the
//! confinement live in [`crate::exec`]; this file only maps between the WIT
//! types and that module.

use super::bindings::process::{self, Command, Host, Output, ProcessError};
use super::store::CallState;
use crate::exec::ExecError;
use wasmtime::component::{HasSelf, Linker};

/// Adds `corral:plugin/process`; plugins without `grants.exec` cannot
/// import it (see `imports::check`), and calls whose tool does not declare
/// `execute` are refused when they run a program.
pub(super) fn add_to_linker(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    process::add_to_linker::<CallState, HasSelf<CallState>>(linker, |s| s)
}

impl Host for CallState {
    async fn run(&mut self, command: Command) -> Result<Output, ProcessError> {
        // Before the grants: they say which programs the plugin may ever run,
        // the call's declared effects whether this call may run any.
        if let Err(why) = self.caps.process(&self.plugin.name) {
            tracing::warn!(target: "corral::exec", "refused {:?}: {why}", command.program);
            return Err(ProcessError::NotGranted(why));
        }
        let Some(exec) = self.plugin.exec.clone() else {
            // The load-time check refuses such plugins; this is defence in depth.
            return Err(ProcessError::NotGranted(format!(
                "plugin `{}` has no grants.exec",
                self.plugin.name
            )));
        };
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
