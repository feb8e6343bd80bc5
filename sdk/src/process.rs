//! Running programs through the host, for plugins whose manifest entry has
//! `grants.exec`. The host checks each call against the grant, runs the
//! program without a shell, inside the workspace, with a scrubbed
//! environment, a timeout and an output cap, confined by the kernel where it
//! can be. A plugin without the grant loads, but every call gets
//! [`Error::NotGranted`] naming the missing manifest entry; so does a call
//! from a tool that does not declare `Effect::Execute` (or from a preview).

use crate::__bindings::corral::plugin::process as wit;

/// A program to run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Command {
    /// The program, as named in the manifest's `grants.exec`.
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Working directory relative to the workspace root.
    pub cwd: Option<String>,
    /// Wall-clock limit (capped by the grant).
    pub timeout_ms: Option<u64>,
}

impl Command {
    /// `program` with no arguments.
    pub fn new(program: impl Into<String>) -> Self {
        Self {
            program: program.into(),
            ..Self::default()
        }
    }

    /// Adds arguments.
    #[must_use]
    pub fn args<I: IntoIterator<Item = S>, S: Into<String>>(mut self, args: I) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Sets the working directory.
    #[must_use]
    pub fn cwd(mut self, cwd: impl Into<String>) -> Self {
        self.cwd = Some(cwd.into());
        self
    }

    /// Sets the timeout.
    #[must_use]
    pub fn timeout_ms(mut self, ms: u64) -> Self {
        self.timeout_ms = Some(ms);
        self
    }

    /// Runs the program to completion.
    pub fn run(&self) -> Result<Output, Error> {
        let cmd = wit::Command {
            program: self.program.clone(),
            args: self.args.clone(),
            cwd: self.cwd.clone(),
            timeout_ms: self.timeout_ms,
        };
        match wit::run(&cmd) {
            Ok(o) => Ok(Output {
                exit_code: o.exit_code,
                stdout: o.stdout,
                stderr: o.stderr,
                truncated: o.truncated,
                timed_out: o.timed_out,
            }),
            Err(wit::ProcessError::NotGranted(m)) => Err(Error::NotGranted(m)),
            Err(wit::ProcessError::Invalid(m)) => Err(Error::Invalid(m)),
            Err(wit::ProcessError::SpawnFailed(m)) => Err(Error::SpawnFailed(m)),
        }
    }
}

/// What a program did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Output {
    /// Exit code, if it exited.
    pub exit_code: Option<i32>,
    /// Standard output, cut at the cap.
    pub stdout: String,
    /// Standard error, cut at the cap.
    pub stderr: String,
    /// Whether output was cut.
    pub truncated: bool,
    /// Whether the timeout killed it.
    pub timed_out: bool,
}

/// Why a program did not run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// The program or its arguments are not granted.
    NotGranted(String),
    /// A bad request (e.g. a working directory outside the workspace).
    Invalid(String),
    /// The program could not start.
    SpawnFailed(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::NotGranted(m) => write!(f, "not allowed: {m}"),
            Error::Invalid(m) => write!(f, "invalid: {m}"),
            Error::SpawnFailed(m) => write!(f, "could not start: {m}"),
        }
    }
}

impl From<Error> for crate::Error {
    fn from(e: Error) -> Self {
        crate::Error::Failed(e.to_string())
    }
}
