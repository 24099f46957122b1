//! The environment squadd gives the programs it starts (agent runs, its own
//! git commands, notify hooks): nothing of its own environment but an
//! allow-list. A token given to the service must not reach an agent, a git
//! hook or a hook script (docs/security.md).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether this process is squadd (set once at its start): then the git
/// commands it runs through [`git`] get the cleared environment. squadctl's
/// git keeps its caller's (a pre-commit hook's `GIT_INDEX_FILE`).
static DAEMON: AtomicBool = AtomicBool::new(false);

/// git options that keep code the repository holds from running in a git
/// command squadd or `check` runs: hooks looked for in `/dev/null` (not a
/// directory, so no hook is ever found there, and nothing can be planted
/// in it) and no fsmonitor, whatever the repository's configuration says.
pub(crate) const NO_REPOSITORY_CODE: [&str; 4] = [
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
];

/// The variables of squadd's environment its children get; `LC_*` too.
pub(crate) const ALLOWED_ENV: &[&str] = &["PATH", "HOME", "USER", "LANG", "TERM", "TMPDIR"];

/// From `inherited` (squadd's own environment), the allow-list, `LC_*` and
/// the names in `pass`. Names or values that are not UTF-8 are dropped.
pub(crate) fn cleared(
    inherited: impl IntoIterator<Item = (OsString, OsString)>,
    pass: &[String],
) -> BTreeMap<String, String> {
    inherited
        .into_iter()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .filter(|(k, _)| {
            ALLOWED_ENV.contains(&k.as_str()) || k.starts_with("LC_") || pass.iter().any(|p| p == k)
        })
        .collect()
}

/// `cmd` with this process's environment cleared down to [`cleared`]
/// (nothing passed beyond the allow-list).
pub(crate) fn clear(cmd: &mut Command) -> &mut Command {
    cmd.env_clear().envs(cleared(std::env::vars_os(), &[]))
}

/// Marks this process as squadd (see [`git`]) and seals its `/proc` files
/// ([`seal_proc`]).
pub(crate) fn mark_daemon() {
    DAEMON.store(true, Ordering::Relaxed);
    seal_proc();
}

/// Makes this process not dumpable: its `/proc/<pid>/` files that hold
/// secrets (`environ`, `mem`, `fd/`) become root's, so a run of the same
/// uid cannot read squadd's environment from `/proc/$PPID/environ`, nor
/// attach a debugger to it. Programs squadd starts are dumpable again
/// after their exec (the kernel resets it), so agents are not affected.
fn seal_proc() {
    // SAFETY: prctl with integer arguments only; no memory involved.
    if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) } != 0 {
        tracing::warn!(
            error = %std::io::Error::last_os_error(),
            "cannot make squadd non-dumpable: runs of its uid can read its environment"
        );
    }
}

/// A `git` command that runs no code of the repository
/// ([`NO_REPOSITORY_CODE`]), with quoted paths off; in squadd, with the
/// cleared environment ([`clear`]), so neither git nor anything it starts
/// sees squadd's environment (its service tokens, its caller's `SQUAD_*`).
pub(crate) fn git() -> Command {
    let mut cmd = Command::new("git");
    if DAEMON.load(Ordering::Relaxed) {
        clear(&mut cmd);
    }
    cmd.args(["-c", "core.quotePath=false"])
        .args(NO_REPOSITORY_CODE);
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_allow_list_lc_and_passed_names_stay() {
        let inherited = [
            ("PATH", "/bin"),
            ("LC_ALL", "C"),
            ("SERVICE_TOKEN", "hunter2"),
            ("GIT_DIR", "/elsewhere"),
            ("PASSED", "yes"),
        ]
        .map(|(k, v)| (OsString::from(k), OsString::from(v)));
        let env = cleared(inherited, &["PASSED".to_string()]);
        let names: Vec<&str> = env.keys().map(String::as_str).collect();
        assert_eq!(names, ["LC_ALL", "PASSED", "PATH"]);
    }
}
