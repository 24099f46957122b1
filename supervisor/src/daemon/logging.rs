//! Where squadd's log goes, and the last warnings it logged (issue 40
//! item 2).
//!
//! squadd logs to stderr, except when it was started in the background of
//! an interactive terminal (`squadd --root . &`): its lines would then be
//! written over whatever runs in the foreground (`squadctl top`), so it
//! logs to `.squad/run/squadd.log` instead (silently: even one line saying
//! so could land on the screen of the command typed next; a fatal error
//! still goes to stderr). `--log-file`
//! chooses either explicitly. Whatever the destination, the last warnings
//! and errors are kept in memory and served with the status answer, so
//! `squadctl top` and `status --json` show them.

use chrono::Utc;
use std::collections::VecDeque;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use tracing::field::{Field, Visit};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;

/// The log file of a root squadd was started in the background for,
/// relative to the root.
pub const BACKGROUND_LOG: &str = ".squad/run/squadd.log";

/// A log file larger than this is renamed to `squadd.log.old` when squadd
/// starts (one generation kept), so a long-lived project's log stays small.
const ROTATE_BYTES: u64 = 8 << 20;

/// How many warnings and errors are kept for the status answer.
const KEPT: usize = 8;

pub(crate) use crate::status::LogLine;

static RECENT: Mutex<VecDeque<LogLine>> = Mutex::new(VecDeque::new());

/// The last warnings and errors, oldest first.
pub(crate) fn recent() -> Vec<LogLine> {
    RECENT
        .lock()
        .map(|r| r.iter().cloned().collect())
        .unwrap_or_default()
}

/// Where the log goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogTarget {
    /// stderr (a terminal in the foreground, a pipe, the journal).
    Stderr,
    /// A file, appended to.
    File(PathBuf),
}

/// Chooses the destination: `explicit` (`--log-file`; `-` is stderr), else
/// [`BACKGROUND_LOG`] of `root` when squadd runs in the background of a
/// terminal, else stderr.
pub fn choose(explicit: Option<&Path>, root: &Path) -> LogTarget {
    match explicit {
        Some(p) if p.as_os_str() == "-" => LogTarget::Stderr,
        Some(p) => LogTarget::File(p.to_path_buf()),
        None if in_background_on_a_terminal() => LogTarget::File(root.join(BACKGROUND_LOG)),
        None => LogTarget::Stderr,
    }
}

/// Whether stderr is a terminal whose foreground process group is not
/// squadd's: started with `&` from an interactive shell.
fn in_background_on_a_terminal() -> bool {
    use std::io::IsTerminal;
    if !io::stderr().is_terminal() {
        return false;
    }
    // SAFETY: tcgetpgrp and getpgrp only read the process's own state;
    // fd 2 is open (it is a terminal, checked above).
    let (foreground, own) = unsafe { (libc::tcgetpgrp(2), libc::getpgrp()) };
    foreground > 0 && foreground != own
}

/// Opens a log file for appending (created 0600; the directories of
/// [`BACKGROUND_LOG`] with the project's layout), renaming a large one
/// first.
fn open_log(path: &Path, root: &Path) -> io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    if path == root.join(BACKGROUND_LOG) {
        crate::layout::create_layout(root)?;
    }
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file() && m.len() > ROTATE_BYTES) {
        let mut old = path.as_os_str().to_owned();
        old.push(".old");
        std::fs::rename(path, old)?;
    }
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

/// Installs the global subscriber: `filter`, the text or JSON format on
/// `target`, and the keeper of recent warnings. `Err` names the log file
/// that could not be opened.
pub fn install(
    filter: tracing_subscriber::EnvFilter,
    json: bool,
    target: &LogTarget,
    root: &Path,
) -> Result<(), String> {
    use std::io::IsTerminal;
    let (writer, ansi) = match target {
        LogTarget::Stderr => (
            tracing_subscriber::fmt::writer::BoxMakeWriter::new(io::stderr),
            io::stderr().is_terminal(),
        ),
        LogTarget::File(path) => {
            let file = open_log(path, root).map_err(|e| format!("{}: {e}", path.display()))?;
            (
                tracing_subscriber::fmt::writer::BoxMakeWriter::new(Mutex::new(file)),
                false,
            )
        }
    };
    let fmt = tracing_subscriber::fmt::layer()
        .with_ansi(ansi)
        .with_writer(writer);
    let fmt: Box<dyn Layer<_> + Send + Sync> = if json {
        Box::new(fmt.json())
    } else {
        Box::new(fmt)
    };
    tracing_subscriber::registry()
        .with(filter)
        .with(fmt)
        .with(KeepWarnings)
        .try_init()
        .map_err(|e| e.to_string())
}

/// The layer keeping the last [`KEPT`] warnings and errors.
struct KeepWarnings;

impl<S: tracing::Subscriber> Layer<S> for KeepWarnings {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let level = *event.metadata().level();
        if level > tracing::Level::WARN {
            return;
        }
        let mut text = Text::default();
        event.record(&mut text);
        keep(LogLine {
            at: Utc::now(),
            level: level.to_string(),
            text: text.0,
        });
    }
}

fn keep(line: LogLine) {
    if let Ok(mut r) = RECENT.lock() {
        keep_in(&mut r, line);
    }
}

/// Appends `line`, dropping the oldest beyond [`KEPT`].
fn keep_in(r: &mut VecDeque<LogLine>, line: LogLine) {
    if r.len() == KEPT {
        r.pop_front();
    }
    r.push_back(line);
}

/// A record's message followed by its fields as `key=value`.
#[derive(Default)]
struct Text(String);

impl Visit for Text {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let rest = std::mem::take(&mut self.0);
            self.0 = format!("{value:?}{}{rest}", if rest.is_empty() { "" } else { " " });
        } else {
            if !self.0.is_empty() {
                self.0.push(' ');
            }
            self.0.push_str(&format!("{}={value:?}", field.name()));
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.record_debug(field, &format_args!("{value}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_explicit_choice_wins_and_dash_is_stderr() {
        let root = Path::new("/p");
        assert_eq!(
            choose(Some(Path::new("/var/log/squadd.log")), root),
            LogTarget::File("/var/log/squadd.log".into())
        );
        assert_eq!(choose(Some(Path::new("-")), root), LogTarget::Stderr);
    }

    #[test]
    fn the_last_warnings_are_kept_in_order_at_most_kept() {
        let mut r = VecDeque::new();
        for i in 0..KEPT + 3 {
            keep_in(
                &mut r,
                LogLine {
                    at: Utc::now(),
                    level: "WARN".into(),
                    text: format!("w{i}"),
                },
            );
        }
        assert_eq!(r.len(), KEPT);
        assert_eq!(r[0].text, "w3");
        assert_eq!(r[KEPT - 1].text, format!("w{}", KEPT + 2));
    }

    #[test]
    fn warnings_and_errors_are_kept_with_their_fields_not_info() {
        let subscriber = tracing_subscriber::registry().with(KeepWarnings);
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!("kept-test: not kept");
            tracing::warn!(error = "boom", path = 3, "kept-test: cannot write");
        });
        let texts: Vec<String> = recent().into_iter().map(|l| l.text).collect();
        assert!(
            texts.contains(&"kept-test: cannot write error=boom path=3".to_string()),
            "{texts:?}"
        );
        assert!(!texts.iter().any(|t| t.contains("not kept")), "{texts:?}");
    }
}
