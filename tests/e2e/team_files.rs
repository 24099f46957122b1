//! Issue 41.5: exports carry what teams write: every file of an agent's
//! folder (`history-archive.md`, which `memory archive` writes, notes), in
//! both shapes, and skills keep their folder names whatever their front
//! matter.

use crate::support::{code, ctl_root, run, stderr};
use std::path::Path;

/// A team with one agent, one retired agent and two skills, and the files
/// the issue found dropped.
fn project_with_files(dir: &Path) {
    let out = run(ctl_root(dir).args(["team", "new", "--member", "ana=Lead"]));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let team = dir.join(".squad");
    let archive = "# Ana — archived history\n\n".to_string()
        + &"### 2025-12-01: An old lesson\nWords the archive keeps. \n\n".repeat(50);
    std::fs::write(team.join("agents/ana/history-archive.md"), &archive).unwrap();
    std::fs::create_dir_all(team.join("agents/ana/notes")).unwrap();
    std::fs::write(
        team.join("agents/ana/notes/design.md"),
        "# Notes\n\nKept.\n",
    )
    .unwrap();
    std::fs::create_dir_all(team.join("agents/_alumni/old")).unwrap();
    std::fs::write(team.join("agents/_alumni/old/history.md"), "# Old\n").unwrap();
    std::fs::write(
        team.join("agents/_alumni/old/history-archive.md"),
        "# Old — archive\n\nRetired words.\n",
    )
    .unwrap();
    // No front matter; front matter naming another folder.
    std::fs::create_dir_all(team.join("skills/plain-notes")).unwrap();
    std::fs::write(
        team.join("skills/plain-notes/SKILL.md"),
        "# Plain notes\n\nA skill without front matter.\n",
    )
    .unwrap();
    std::fs::create_dir_all(team.join("skills/release-steps")).unwrap();
    std::fs::write(
        team.join("skills/release-steps/SKILL.md"),
        "---\nname: How We Release\ndescription: Release steps.\n---\n\nSteps.\n",
    )
    .unwrap();
}

const CARRIED: &[&str] = &[
    "agents/ana/history-archive.md",
    "agents/ana/notes/design.md",
    "agents/_alumni/old/history-archive.md",
    "skills/plain-notes/SKILL.md",
    "skills/release-steps/SKILL.md",
];

#[test]
fn export_and_import_carry_agent_files_and_skill_folder_names_in_both_shapes() {
    // Issue 41.5: history-archive.md was in neither shape and no warning
    // named it (2,861 words of one real agent lost); a skill without front
    // matter came back as `skill-0`, squadctl → squadctl.
    for format in ["squad-cli", "squad"] {
        let tmp = tempfile::tempdir().unwrap();
        let from = tmp.path().join("from");
        std::fs::create_dir_all(&from).unwrap();
        project_with_files(&from);
        let file = tmp.path().join("export.json");
        let out = run(ctl_root(&from)
            .args(["export", "--format", format, "--out"])
            .arg(&file));
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        if format == "squad-cli" {
            // What `squad import` leaves out is named.
            assert!(
                stderr(&out).contains("agent ana: history-archive.md, notes/design.md"),
                "{}",
                stderr(&out)
            );
        }
        let to = tmp.path().join("to");
        std::fs::create_dir_all(&to).unwrap();
        let out = run(ctl_root(&to).arg("import").arg(&file));
        assert_eq!(code(&out), 0, "{format}: {}", stderr(&out));
        for rel in CARRIED {
            let a = std::fs::read(from.join(".squad").join(rel)).unwrap();
            let b = std::fs::read(to.join(".squad").join(rel))
                .unwrap_or_else(|e| panic!("{format}: {rel}: {e}"));
            assert!(a == b, "{format}: {rel} differs");
        }
        assert!(!to.join(".squad/skills/skill-0").exists(), "{format}");
        // And again, from the imported team: the same files.
        let again = tmp.path().join("again.json");
        let out = run(ctl_root(&to)
            .args(["export", "--format", format, "--out"])
            .arg(&again));
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let strip = |p: &Path| {
            let mut v: serde_json::Value =
                serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap();
            let o = v.as_object_mut().unwrap();
            for k in ["exported_at", "exported_from", "casting"] {
                o.remove(k);
            }
            // Histories carry the import banner; compared above by file.
            for a in o["agents"].as_object_mut().unwrap().values_mut() {
                a.as_object_mut().unwrap().remove("history");
            }
            v
        };
        assert_eq!(strip(&file), strip(&again), "{format}");
    }
}
