//! Whether the squadctl a hook line names can be started (issue 40 item
//! 6): `guard install` and `hooks install` write a bare `squadctl` by
//! default, which the agent CLI or git looks up on its PATH later; when
//! this shell's PATH has no squadctl, every hook would fail to start, so
//! the install says so and how to fix it.

use std::path::{Path, PathBuf};

/// The executable `program` names: itself when it holds a `/`, else the
/// first executable of that name on `path` (a PATH value).
fn lookup(program: &str, path: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let runnable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        let p = PathBuf::from(program);
        return runnable(&p).then_some(p);
    }
    std::env::split_paths(path?)
        .map(|d| d.join(program))
        .find(|p| runnable(p))
}

/// A warning when the hooks' `program` cannot be started from this
/// shell's PATH, naming the fix; `None` when it can.
pub(crate) fn unreachable_warning(program: &str, what: &str) -> Option<String> {
    if lookup(program, std::env::var_os("PATH").as_deref()).is_some() {
        return None;
    }
    let this = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "/path/to/squadctl".into());
    Some(if program.contains('/') {
        format!(
            "{what} run `{program}`, which is not an executable file here; pass --program {this}"
        )
    } else {
        format!(
            "{what} run `{program}`, which is not on this shell's PATH: they would fail to start it. Put its directory on the PATH they run with, or pass --program {this}"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_name_is_looked_up_on_the_path_given() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let exe = dir.path().join("squadctl");
        std::fs::write(&exe, "#!/bin/sh\n").unwrap_or_else(|e| panic!("{e}"));
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755))
            .unwrap_or_else(|e| panic!("{e}"));
        let path = std::env::join_paths(["/nonexistent", &dir.path().display().to_string()])
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(lookup("squadctl", Some(&path)), Some(exe.clone()));
        assert_eq!(
            lookup("squadctl", Some(std::ffi::OsStr::new("/nonexistent"))),
            None
        );
        assert_eq!(lookup(&exe.display().to_string(), None), Some(exe));
        assert_eq!(lookup("/nonexistent/squadctl", None), None);
    }
}
