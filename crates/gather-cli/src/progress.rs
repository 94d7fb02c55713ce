//! Progress bars (`indicatif`) that appear only on work that runs for more than a second.
//!
//! A [`Progress`] starts hidden; a helper thread reveals it on stderr once the delay has passed
//! and the work is not finished. Short runs therefore print nothing, and output piped to a file
//! stays clean (indicatif draws nothing when stderr is not a terminal).
//!
//! ```
//! use gather_cli::progress::{Kind, Progress};
//! use std::time::Duration;
//! let p = Progress::start_after("reading", Kind::Count(10), true, Duration::from_secs(60));
//! p.inc(10);
//! assert!(!p.revealed()); // finished long before the delay
//! p.finish();
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How long work may run before its progress bar appears.
pub const DELAY: Duration = Duration::from_secs(1);

/// What the bar counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Bytes of a file, out of a known total.
    Bytes(u64),
    /// Items (conformance cases), out of a known total.
    Count(u64),
    /// Work of unknown length: a spinner with the elapsed time.
    Spinner,
}

/// A progress bar revealed after a delay (see the module docs).
#[derive(Debug)]
pub struct Progress {
    bar: ProgressBar,
    done: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
    revealed: Arc<AtomicBool>,
}

fn style(kind: Kind) -> ProgressStyle {
    let template = match kind {
        Kind::Bytes(_) => "{msg} [{bar:30}] {bytes}/{total_bytes} ({eta})",
        Kind::Count(_) => "{msg} [{bar:30}] {pos}/{len} ({eta})",
        Kind::Spinner => "{spinner} {msg} ({elapsed})",
    };
    let fallback = match kind {
        Kind::Spinner => ProgressStyle::default_spinner(),
        _ => ProgressStyle::default_bar(),
    };
    ProgressStyle::with_template(template)
        .map(|s| s.progress_chars("=> "))
        .unwrap_or(fallback)
}

impl Progress {
    /// Starts a bar revealed after [`DELAY`]; with `enabled == false` it never appears.
    ///
    /// ```
    /// let p = gather_cli::progress::Progress::start("x", gather_cli::progress::Kind::Spinner, false);
    /// assert!(!p.revealed());
    /// ```
    pub fn start(message: &str, kind: Kind, enabled: bool) -> Progress {
        Progress::start_after(message, kind, enabled, DELAY)
    }

    /// Starts a bar revealed after `delay`.
    ///
    /// ```
    /// use gather_cli::progress::{Kind, Progress};
    /// let p = Progress::start_after("slow", Kind::Spinner, true, std::time::Duration::ZERO);
    /// std::thread::sleep(std::time::Duration::from_millis(200));
    /// assert!(p.revealed());
    /// ```
    pub fn start_after(message: &str, kind: Kind, enabled: bool, delay: Duration) -> Progress {
        let bar = match kind {
            Kind::Bytes(n) | Kind::Count(n) => {
                ProgressBar::with_draw_target(Some(n), ProgressDrawTarget::hidden())
            }
            Kind::Spinner => ProgressBar::hidden(),
        };
        bar.set_style(style(kind));
        bar.set_message(message.to_string());
        let revealed = Arc::new(AtomicBool::new(false));
        let (done, thread) = if enabled {
            let (tx, rx) = mpsc::channel::<()>();
            let shown_bar = bar.clone();
            let flag = revealed.clone();
            let handle = std::thread::spawn(move || {
                if let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(delay) {
                    flag.store(true, Ordering::SeqCst);
                    shown_bar.set_draw_target(ProgressDrawTarget::stderr());
                    shown_bar.enable_steady_tick(Duration::from_millis(120));
                }
            });
            (Some(tx), Some(handle))
        } else {
            (None, None)
        };
        Progress {
            bar,
            done,
            thread,
            revealed,
        }
    }

    /// Advances the bar by `n`.
    pub fn inc(&self, n: u64) {
        self.bar.inc(n);
    }

    /// The underlying bar (cheap to clone, usable from several threads).
    pub fn bar(&self) -> &ProgressBar {
        &self.bar
    }

    /// True once the delay has passed and the bar was put on stderr.
    pub fn revealed(&self) -> bool {
        self.revealed.load(Ordering::SeqCst)
    }

    /// Ends the work: the bar is cleared from the terminal.
    pub fn finish(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if let Some(tx) = self.done.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.bar.finish_and_clear();
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bar_appears_only_after_the_delay() {
        let slow = Progress::start_after("slow", Kind::Count(3), true, Duration::from_millis(20));
        std::thread::sleep(Duration::from_millis(300));
        assert!(slow.revealed());
        slow.inc(3);
        slow.finish();

        let fast = Progress::start_after("fast", Kind::Bytes(3), true, Duration::from_secs(30));
        fast.inc(3);
        assert!(!fast.revealed());
        fast.finish();

        let off = Progress::start_after("off", Kind::Spinner, false, Duration::ZERO);
        std::thread::sleep(Duration::from_millis(50));
        assert!(!off.revealed());
    }
}
