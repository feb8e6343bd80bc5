//! The `corral` command.

mod cli;

fn main() -> std::process::ExitCode {
    // This process runs the calls, so what their programs leave behind is
    // re-parented here, where it can be killed with the call.
    corral_core::native::adopt_orphans();
    cli::main()
}
