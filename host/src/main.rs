//! The `corral` command.

mod cli;
mod run;

fn main() -> std::process::ExitCode {
    cli::main()
}
