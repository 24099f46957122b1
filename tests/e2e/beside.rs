//! Issue 41.6: squadd and squadctl beside other tools that move `.squad/`:
//! two imports at once are serialised and never strand the sessions; the
//! Squad CLI's `import --force` (which moves `.squad/` to
//! `.squad-archive-<ts>/`) under a running squadd is reported with the
//! archive's name, `health` keeps answering, and squadd resumes when its
//! sessions are back.

use crate::support::{code, ctl_root, run, stderr, stdout};
use std::path::Path;

/// A project with squadd's files, a session and a team; and an export of
/// another team beside it.
fn project_and_bundle(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let p = dir.join("p");
    std::fs::create_dir_all(&p).unwrap();
    assert_eq!(code(&run(ctl_root(&p).arg("init"))), 0);
    let out = run(ctl_root(&p).args(["session", "new", "--slug", "kept"]));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(
        code(&run(
            ctl_root(&p).args(["team", "new", "--member", "ana=Lead"])
        )),
        0
    );
    let other = dir.join("other");
    std::fs::create_dir_all(&other).unwrap();
    assert_eq!(
        code(&run(
            ctl_root(&other).args(["team", "new", "--member", "bo=Dev"])
        )),
        0
    );
    let bundle = dir.join("bundle.json");
    let out = run(ctl_root(&other).args(["export", "--out"]).arg(&bundle));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    (p, bundle)
}

#[test]
fn two_imports_at_once_are_serialised_and_strand_no_session() {
    for round in 0..16 {
        let tmp = tempfile::tempdir().unwrap();
        let (p, bundle) = project_and_bundle(tmp.path());
        let sessions: Vec<_> = std::fs::read_dir(p.join(".squad/sessions"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        let children: Vec<_> = (0..2)
            .map(|_| {
                ctl_root(&p)
                    .args(["import", "--force"])
                    .arg(&bundle)
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for c in children {
            let out = c.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "round {round}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        // The sessions are where squadd and squadctl look for them.
        let now: Vec<_> = std::fs::read_dir(p.join(".squad/sessions"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(now, sessions, "round {round}");
        let left: Vec<String> = std::fs::read_dir(&p)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(".squad.import") || n.ends_with("journal.json"))
            .collect();
        assert!(left.is_empty(), "round {round}: {left:?}");
        let out = run(ctl_root(&p).args(["team", "show"]));
        assert!(
            stdout(&out).contains("bo"),
            "round {round}: {}",
            stdout(&out)
        );
    }
}
