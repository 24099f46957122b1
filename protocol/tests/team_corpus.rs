//! The team directories of tests/corpora/squad (real projects' `.squad/` and
//! `.ai-team/`, vendored with their licence): every one reads, the verdicts
//! are the expected ones, and an export → import plan → export round trip
//! gives the same bundle (timestamps aside) in both shapes.

#![allow(clippy::unwrap_used)] // a test or bench: a failed unwrap is a failed run

use squad_protocol::Rule;
use squad_protocol::team::bundle::{self, ExportOptions, ImportOptions, Shape};
use squad_protocol::team::read_team;
use squad_protocol::teamdir::locate;
use std::path::{Path, PathBuf};

fn corpus(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/corpora/squad")
        .join(rel)
}

fn rules(project: &str) -> Vec<(Rule, String)> {
    let t = read_team(&locate(&corpus(project)).unwrap());
    t.diagnostics
        .iter()
        .map(|d| (d.rule, d.message.clone()))
        .collect()
}

#[test]
fn squad_head_reads_with_only_expected_findings() {
    let t = read_team(&locate(&corpus("squad-head")).unwrap());
    assert_eq!(t.roster.members.len(), 21);
    assert_eq!(t.roster.members[3].name, "FIDO");
    assert_eq!(t.roster.members[3].folder, "fido");
    assert!(t.roster.project_context.is_some());
    assert_eq!(
        t.agents.keys().collect::<Vec<_>>(),
        ["fido", "flight", "scribe"]
    );
    assert_eq!(t.alumni.keys().collect::<Vec<_>>(), ["kobayashi"]);
    assert_eq!(t.agents["fido"].role.as_deref(), Some("Quality Owner"));
    assert_eq!(
        t.casting.keys().collect::<Vec<_>>(),
        ["history", "policy", "registry"]
    );
    // Only the 17 members whose folders were not published (Ralph's
    // charter is `—`: no folder expected).
    let errors: Vec<_> = t.diagnostics.iter().filter(|d| d.is_error()).collect();
    assert!(errors.is_empty(), "{errors:#?}");
    assert!(
        t.diagnostics
            .iter()
            .all(|d| d.rule == Rule::TeamMemberWithoutAgent),
        "{:#?}",
        t.diagnostics
    );
    assert_eq!(t.diagnostics.len(), 17);
}

#[test]
fn fixtures_give_their_verdicts() {
    // The deliberately broken one: no Members table, invalid casting JSON
    // reported at its line and column.
    let t = read_team(&locate(&corpus("squad-head/test-fixtures/dogfood/corrupt-state")).unwrap());
    let json = t
        .diagnostics
        .iter()
        .find(|d| d.rule == Rule::TeamInvalidJson)
        .unwrap();
    let loc = json.location.unwrap();
    assert_eq!((loc.line, loc.column), (4, 3));
    assert!(t.diagnostics.iter().any(|d| d.rule == Rule::TeamNoMembers));
    // A roster without a Charter column: members without folders warned.
    let many = rules("squad-head/test-fixtures/dogfood/many-agents");
    assert!(
        many.iter()
            .all(|(r, _)| !r.severity().eq(&squad_protocol::Severity::Error))
    );
    // Legacy `.ai-team/` rosters, Project Context before Members.
    for p in [
        "squadui-fixtures/test-fixtures",
        "squadui-fixtures/test-fixtures/acceptance-scenario",
    ] {
        let t = read_team(&locate(&corpus(p)).unwrap());
        assert!(t.legacy);
        assert!(t.roster.members.len() >= 3, "{p}");
        assert!(t.roster.project_context.is_some(), "{p}");
    }
    let fixture = read_team(&locate(&corpus("squad-head/test-fixtures")).unwrap());
    assert_eq!(fixture.roster.members.len(), 3);
    assert!(
        fixture
            .diagnostics
            .iter()
            .any(|d| d.rule == Rule::TeamNoProjectContext)
    );
}

fn export(project: &Path, shape: Shape, at: &str) -> bundle::Bundle {
    let t = read_team(&locate(project).unwrap());
    bundle::from_team(
        &t,
        ExportOptions {
            shape: Some(shape),
            exported_at: at.into(),
            project: "p".into(),
            ..Default::default()
        },
    )
    .unwrap()
}

#[test]
fn export_import_export_is_the_identity_on_real_teams() {
    for shape in [Shape::Squad, Shape::SquadCli] {
        for p in [
            "squad-head",
            "squadui-fixtures/test-fixtures",
            "squad-head/test-fixtures/dogfood/python-flask",
        ] {
            let first = export(&corpus(p), shape, "t1");
            let text = bundle::to_json(&first);
            let parsed = bundle::parse(text.as_bytes()).unwrap();
            let plan = bundle::plan(
                &parsed,
                &ImportOptions {
                    imported_at: "t2".into(),
                    date: "2026-01-01".into(),
                    builtin_skills: &[],
                },
            );
            assert!(plan.is_contained());
            let tmp = tempfile::tempdir().unwrap();
            let dir = tmp.path().join(".squad");
            std::fs::create_dir(&dir).unwrap();
            for d in &plan.dirs {
                std::fs::create_dir_all(dir.join(d)).unwrap();
            }
            for (f, text) in &plan.files {
                std::fs::write(dir.join(f), text).unwrap();
            }
            let second = export(tmp.path(), shape, "t1");
            assert_eq!(first, second, "{p} ({})", shape.as_str());
            assert_eq!(bundle::to_json(&second), text);
            if p == "squad-head" {
                assert!(dir.join("agents/_alumni/kobayashi/history.md").is_file());
                assert!(
                    second.agents["fido"]
                        .history
                        .as_deref()
                        .unwrap()
                        .contains("## Learnings")
                );
                assert!(
                    second.agents["scribe"].history.is_none(),
                    "Scribe's log stays home"
                );
                assert!(
                    !second
                        .team
                        .as_deref()
                        .unwrap()
                        .contains("## Project Context")
                );
            }
        }
    }
}
