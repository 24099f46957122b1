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

/// `squadctl status --json` of `root`, when it answers.
fn status(root: &Path) -> Option<serde_json::Value> {
    let out = run(ctl_root(root).args(["status", "--json"]));
    serde_json::from_str(&stdout(&out)).ok()
}

/// The Squad CLI's `import --force` under a running squadd (or, without
/// the CLI, what it does: `.squad/` renamed `.squad-archive-<ts>/`, a new
/// `.squad/` with the imported team).
fn other_tools_import(p: &Path, bundle: &Path) {
    match crate::interop::SquadCli::find() {
        Some(cli) => {
            let out = cli.run(p, &["import", bundle.to_str().unwrap(), "--force"]);
            assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
        }
        None => {
            std::fs::rename(p.join(".squad"), p.join(".squad-archive-20261129T081500Z")).unwrap();
            std::fs::create_dir_all(p.join(".squad")).unwrap();
            std::fs::write(
                p.join(".squad/team.md"),
                "# Imported\n\n## Members\n\n| Name | Role |\n|---|---|\n| bo | Dev |\n",
            )
            .unwrap();
        }
    }
}

#[test]
fn squadd_says_where_another_tools_import_moved_its_root_and_resumes() {
    use crate::daemon::{Daemon, eventually};
    let tmp = tempfile::tempdir().unwrap();
    let (p, bundle) = project_and_bundle(tmp.path());
    let _d = Daemon::start(&p);
    other_tools_import(&p, &bundle);
    // status answers (squadd took control of the new .squad/), names the
    // archive, and says what to do.
    let (to, item) = eventually("status names where .squad/ went", || {
        let s = status(&p)?;
        let root = &s["roots"][0];
        let to = root["moved_to"].as_str()?.to_string();
        let item = s["needs_attention"]
            .as_array()?
            .iter()
            .find(|i| i["kind"] == "root-missing")?
            .clone();
        (root["missing"] == true && s["daemon"]["state"] == "running").then_some((to, item))
    });
    assert!(to.starts_with(".squad-archive-"), "{to}");
    assert!(p.join(&to).join("sessions").is_dir());
    assert_eq!(item["severity"], "critical");
    assert!(item["summary"].as_str().unwrap().contains(&to), "{item}");
    let health = run(ctl_root(&p).arg("health"));
    assert!(stdout(&health).contains(&to), "{}", stdout(&health));
    assert!(
        crate::support::events(&p)
            .iter()
            .any(|e| e["kind"] == "root-moved" && e["to"] == to.as_str()),
        "no root-moved event"
    );
    // The command of the item brings squadd's sessions back: it resumes.
    let out = run(std::process::Command::new("sh")
        .arg("-c")
        .arg(item["command"].as_str().unwrap()));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    eventually("squadd resumed with the session", || {
        let s = status(&p)?;
        let root = &s["roots"][0];
        (root["missing"] == false && root["sessions"].as_array()?.len() == 1).then_some(())
    });
    let out = run(ctl_root(&p).args(["team", "show"]));
    assert!(
        stdout(&out).contains("bo"),
        "the imported team stays: {}",
        stdout(&out)
    );
}
