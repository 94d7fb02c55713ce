//! The error of a subcommand: a one-line message, an optional hint with the fix, and the exit
//! code. `main` prints it to stderr as `error: <message>` and `hint: <hint>` and exits with the
//! code; nothing in the command panics on user input.
//!
//! ```
//! use gather_cli::fail::Failure;
//! let f = Failure::input("cannot read x.npy").with_hint("check the path");
//! assert_eq!(f.code, 2);
//! assert_eq!(f.to_string(), "error: cannot read x.npy\nhint: check the path");
//! ```

use std::fmt;

/// Exit code of bad input: unreadable or malformed files, wrong dtypes, missing or malformed
/// arguments, an op that rejects its arguments (out-of-range index ...). clap uses it too.
pub const EXIT_INPUT: u8 = 2;

/// Exit code of a negative answer that is not an error: `check` of an invalid call, `infer` that
/// finds no dim.
pub const EXIT_NO: u8 = 1;

/// A failed subcommand.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    /// One line saying what went wrong, with the numbers.
    pub message: String,
    /// How to fix it, where there is a fix.
    pub hint: Option<String>,
    /// The process exit code.
    pub code: u8,
}

impl Failure {
    /// A failure caused by the user's input (exit code 2).
    ///
    /// ```
    /// assert_eq!(gather_cli::fail::Failure::input("bad").code, 2);
    /// ```
    pub fn input(message: impl Into<String>) -> Failure {
        Failure {
            message: message.into(),
            hint: None,
            code: EXIT_INPUT,
        }
    }

    /// Adds (or replaces) the hint.
    ///
    /// ```
    /// let f = gather_cli::fail::Failure::input("bad").with_hint("do this");
    /// assert_eq!(f.hint.as_deref(), Some("do this"));
    /// ```
    pub fn with_hint(mut self, hint: impl Into<String>) -> Failure {
        self.hint = Some(hint.into());
        self
    }

    /// Prefixes the message with `context: ` (the file or argument it concerns).
    ///
    /// ```
    /// let f = gather_cli::fail::Failure::input("bad header").context("x.npy");
    /// assert_eq!(f.message, "x.npy: bad header");
    /// ```
    pub fn context(mut self, context: &str) -> Failure {
        self.message = format!("{context}: {}", self.message);
        self
    }
}

impl From<gather::Error> for Failure {
    fn from(e: gather::Error) -> Failure {
        Failure {
            message: e.message().to_string(),
            hint: e.hint().map(str::to_string),
            code: EXIT_INPUT,
        }
    }
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Failure {
        Failure::input(format!("cannot write the output: {e}"))
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "error: {}", self.message)?;
        if let Some(h) = &self.hint {
            write!(f, "\nhint: {h}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Failure {}

/// `Result` with [`Failure`].
pub type CliResult<T> = Result<T, Failure>;
