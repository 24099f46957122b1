//! Issue 41.2: a legacy project (its team in `.ai-team/`) stays whole.
//! `squadctl init` there made `.squad/` beside it: the Squad CLI took the
//! nearly empty `.squad/` for the team (`squad doctor` 2 → 6 failures,
//! `squad export` "No squad found", `--migrate-directory` refused) and,
//! after a plain `squad upgrade`, so did squadctl. Now `init` migrates the
//! project as the CLI's own `squad upgrade --migrate-directory` does.

use crate::interop::SquadCli;
use crate::support::{code, copy_tree, ctl_root, run, stderr, stdout};
use std::path::Path;

/// A legacy project: the real squad-head team kept as `.ai-team/`, with the
/// `.gitattributes` lines Squad writes for it.
fn legacy_project(dir: &Path) {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/corpora/squad/squad-head");
    copy_tree(&corpus.join(".squad"), &dir.join(".ai-team"));
    std::fs::write(
        dir.join(".gitattributes"),
        ".ai-team/decisions.md merge=union\n.ai-team/agents/*/history.md merge=union\n",
    )
    .unwrap();
}

/// The ❌ lines of `squad doctor` (what it finds wrong).
fn doctor_failures(cli: &SquadCli, dir: &Path) -> Vec<String> {
    let out = cli.run(dir, &["doctor"]);
    stdout(&out)
        .lines()
        .filter(|l| l.contains('❌'))
        .map(str::to_string)
        .collect()
}

#[test]
fn init_on_a_legacy_project_migrates_it_as_the_squad_cli_does() {
    let Some(cli) = SquadCli::find() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let ours = tmp.path().join("ours");
    let theirs = tmp.path().join("theirs");
    for d in [&ours, &theirs] {
        std::fs::create_dir_all(d).unwrap();
        legacy_project(d);
    }
    // The CLI's own migration (within its upgrade), for comparison.
    let out = cli.run(&theirs, &["upgrade", "--migrate-directory"]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    let legacy_failures = doctor_failures(&cli, &ours);
    let out = run(ctl_root(&ours).arg("init"));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stdout(&out).contains("migrated the legacy team directory .ai-team/ to .squad/"),
        "{}",
        stdout(&out)
    );
    assert!(!ours.join(".ai-team").exists(), "never both");
    // The references follow as the CLI's migration makes them (its upgrade
    // adds lines of its own besides).
    let attributes = std::fs::read_to_string(ours.join(".gitattributes")).unwrap();
    let cli_attributes = std::fs::read_to_string(theirs.join(".gitattributes")).unwrap();
    assert!(!attributes.contains(".ai-team/"), "{attributes}");
    for l in attributes.lines() {
        assert!(
            cli_attributes.lines().any(|c| c == l),
            "{l}: {cli_attributes}"
        );
    }
    // `squad doctor` finds nothing it did not find in the legacy project
    // (it found 6 failures after the old init, 2 before).
    let failures = doctor_failures(&cli, &ours);
    for f in &failures {
        assert!(
            legacy_failures.contains(f),
            "new: {f} (before: {legacy_failures:?})"
        );
    }
    let out = cli.run(&ours, &["export"]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert!(ours.join("squad-export.json").is_file());
    // squadctl and the CLI agree on the team, before and after `squad upgrade`.
    let members = |dir: &Path| {
        let out = run(ctl_root(dir).args(["team", "show", "--json"]));
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
        v["members"].as_array().map_or(0, Vec::len)
    };
    let before = members(&ours);
    assert!(before > 0);
    let out = cli.run(&ours, &["upgrade"]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert_eq!(members(&ours), before);
    let out = run(ctl_root(&ours).arg("validate"));
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
}

#[test]
fn squadctl_finds_a_legacy_team_where_the_squad_cli_does() {
    // Without init: validate, team show and memory query read `.ai-team/`
    // (validate used to demand `squadctl init`).
    let tmp = tempfile::tempdir().unwrap();
    legacy_project(tmp.path());
    let out = run(ctl_root(tmp.path()).arg("validate"));
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("files"), "{}", stdout(&out));
    let out = run(ctl_root(tmp.path()).args(["team", "show"]));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stdout(&out).contains(".ai-team (legacy name) (21 members"),
        "{}",
        stdout(&out)
    );
    // A command that needs squadd's files says how to get them there.
    let out = run(ctl_root(tmp.path()).arg("status"));
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("whose team is in the legacy `.ai-team/`: run `squadctl --root"),
        "{}",
        stderr(&out)
    );
    assert!(!tmp.path().join(".squad").exists(), "nothing made .squad/");
}

#[test]
fn init_refuses_to_move_a_legacy_team_through_a_link() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("elsewhere")).unwrap();
    std::os::unix::fs::symlink("elsewhere", tmp.path().join(".ai-team")).unwrap();
    let out = run(ctl_root(tmp.path()).arg("init"));
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("squad upgrade --migrate-directory"),
        "{}",
        stderr(&out)
    );
    assert!(!tmp.path().join(".squad").exists());
}
