use super::bundle::{self, Shape};
use super::markdown::*;

#[test]
fn placeholder_round_trips_through_strip() {
    let team = "# Team\n\n## Project Context\n\n**Owner:** X\n\n## Members\n\n| Name | Role |\n|---|---|\n| Ana | Lead |\n";
    let stripped = strip_project_context(team);
    assert!(!stripped.contains("Owner"));
    assert!(stripped.contains("| Ana | Lead |"));
    let imported = with_project_context_placeholder(&stripped, "2026-01-01");
    assert!(imported.contains("## Project Context"));
    assert_eq!(strip_project_context(&imported), stripped);
}

#[test]
fn roster_reads_members_and_falls_back_to_roster() {
    let r = parse_roster(
        "# T\n\n## Roster\n\n| Name | Role | Charter |\n|--|--|--|\n| **Ana** | Lead | `.squad/agents/ana-x/charter.md` |\n| Bo | | — |\n",
    );
    assert_eq!(r.members.len(), 1);
    assert_eq!(r.members[0].name, "Ana");
    assert_eq!(r.members[0].folder, "ana-x");
    assert_eq!(r.problems.len(), 1);
    assert_eq!(r.problems[0].line, 8);
    let none = parse_roster("# T\n\n```\n## Members\n| Name | Role |\n```\n");
    assert_eq!(none.problems[0].kind, RosterProblemKind::NoMembers);
}

#[test]
fn only_the_project_context_section_is_stripped() {
    // A level-1 "Project Context" is a title, not the roster's section.
    let t = "# Project Context\n\n## Members\n\n| Name | Role |\n|--|--|\n| Ana | Lead |\n";
    assert_eq!(strip_project_context(t), t);
    let t = "# T\n\n## Project Context\n\nx\n\n### Stack\n\ny\n\n## Members\n\n| Name | Role |\n";
    assert_eq!(
        strip_project_context(t),
        "# T\n\n## Members\n\n| Name | Role |\n"
    );
    // A history's `# Project Context` section ends at `## Learnings`.
    let h = "# Project Context\n\n- a\n\n## Learnings\n\n- b\n";
    assert_eq!(
        project_sections(h),
        vec![(1, "Project Context".to_string(), 4)]
    );
}

#[test]
fn marking_is_idempotent() {
    let h = "# A\n\n## Project Context\n\n- port 3000\n\n## Learnings\n\n- x\n";
    let once = mark_project_sections(h);
    assert!(once.contains(PROJECT_SPECIFIC_MARK));
    assert_eq!(mark_project_sections(&once), once);
}

#[test]
fn names_that_escape_are_refused() {
    for bad in [
        "", "..", ".", "../x", "/abs", "a/b", "a\\b", ".hidden", "a\0b",
    ] {
        assert!(bundle::name_problem(bad).is_some(), "{bad:?}");
    }
    assert!(bundle::name_problem(&"a".repeat(101)).is_some());
    assert!(bundle::name_problem("fido").is_none());
    assert!(bundle::check_rel_path("$", "scripts/../../x").is_err());
    assert!(bundle::check_rel_path("$", "scripts/run.sh").is_ok());
}

#[test]
fn parse_errors_name_the_json_path() {
    let e = bundle::parse(
        br#"{"squad_format_version":"1.0","casting":{},"agents":{"ana":{"charter":42}}}"#,
    )
    .unwrap_err();
    assert_eq!(e.json_path, "$.agents[\"ana\"].charter");
    assert!(e.message.contains("found a number"), "{e}");
    let e = bundle::parse(br#"{"version":"1.0","casting":{"../../x":{}},"agents":{},"skills":[]}"#)
        .unwrap_err();
    assert!(e.json_path.contains("../../x"), "{e}");
    let e = bundle::parse(b"{\"version\":\"1.0\",\n\"version\":\"1.0\"}").unwrap_err();
    assert_eq!(e.position.map(|p| p.0), Some(2));
    assert!(e.message.contains("duplicate key"), "{e}");
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    assert!(bundle::parse(deep.as_bytes()).is_err());
}

#[test]
fn both_shapes_parse_back() {
    let text = r##"{"squad_format_version":"1.0","exported_at":"t","exported_from":{"project":"p","owner":"o"},
      "casting":{"registry":{"a":1}},"agents":{"ana":{"charter":"c","history":"h"}},"team":"# T\n","routing":"r","ceremonies":null,
      "skills":{"s":{"files":{"SKILL.md":"---\nname: s\n---\n"}}}}"##;
    let b = bundle::parse(text.as_bytes()).unwrap();
    assert_eq!(b.shape, Shape::Squad);
    let again = bundle::parse(bundle::to_json(&b).as_bytes()).unwrap();
    assert_eq!(again, b);
    let cli = bundle::Bundle {
        shape: Shape::SquadCli,
        ..b.clone()
    };
    let back = bundle::parse(bundle::to_json(&cli).as_bytes()).unwrap();
    assert_eq!(back.shape, Shape::SquadCli);
    assert_eq!(back.agents, b.agents);
    assert_eq!(back.skills, b.skills);
    assert_eq!(back.team, b.team);
}

#[test]
fn plan_stays_inside_and_renames_builtin_collisions() {
    let text = r#"{"version":"1.0","casting":{},"agents":{"ana":{"charter":"c"}},"skills":["---\nname: squad-protocol\n---\n"]}"#;
    let b = bundle::parse(text.as_bytes()).unwrap();
    let p = bundle::plan(
        &b,
        &bundle::ImportOptions {
            imported_at: "now".into(),
            date: "today".into(),
            builtin_skills: &["squad-protocol"],
        },
    );
    assert!(p.is_contained());
    assert!(
        p.files
            .iter()
            .any(|(f, _)| f.ends_with("skills/squad-protocol-imported/SKILL.md"))
    );
    assert!(
        p.files
            .iter()
            .any(|(f, t)| f.ends_with("casting/registry.json") && t.contains("imported_from"))
    );
}

#[cfg(unix)]
#[test]
fn symlinked_folders_and_files_are_never_followed() {
    use crate::Rule;
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("registry.json"), "{\"secret\": 1}").unwrap();
    std::fs::write(outside.path().join("charter.md"), "- **Role:** Spy\n").unwrap();
    let team = dir.path().join(".squad");
    std::fs::create_dir_all(team.join("agents")).unwrap();
    std::fs::write(
        team.join("team.md"),
        "## Members\n\n| Name | Role |\n|--|--|\n| Ana | Lead |\n",
    )
    .unwrap();
    std::os::unix::fs::symlink(outside.path(), team.join("casting")).unwrap();
    std::os::unix::fs::symlink(outside.path(), team.join("agents/ana")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("charter.md"), team.join("routing.md")).unwrap();
    let t = super::read_team(&crate::teamdir::locate(dir.path()).unwrap());
    assert!(t.casting.is_empty());
    assert!(t.agents.is_empty());
    assert!(t.routing.is_none());
    let unreadable = t
        .diagnostics
        .iter()
        .filter(|d| d.rule == Rule::TeamUnreadable)
        .count();
    assert_eq!(unreadable, 2, "{:#?}", t.diagnostics);
}

#[test]
fn a_squad_cli_export_of_a_real_team_imports() {
    // What the Squad CLI writes for a team with retired agents: the
    // `_alumni` folder appears as an empty agent, decisions travel, and the
    // roster keeps its Project Context.
    let text = r##"{"version":"1.0","exported_at":"2026-03-01T00:00:00.000Z","squad_version":"0.9.1",
      "team_md":"# T\n\n## Members\n\n| Name | Role |\n|--|--|\n| Ana | Lead |\n\n## Project Context\n\n- **Owner:** Old\n",
      "team":"# T\n","decisions_md":"# D\n","decisions":"# D\n","routing_md":"# R\n",
      "casting":{"registry":{"agents":{}},"history":{},"policy":{}},
      "agents":{"_alumni":{},"ana":{"charter":"- **Role:** Lead\n","history":"# Project Context\n\nold\n"}},
      "skills":["# no front matter\n"]}"##;
    let b = bundle::parse(text.as_bytes()).unwrap();
    assert_eq!(b.shape, Shape::SquadCli);
    assert_eq!(b.agents.keys().collect::<Vec<_>>(), ["ana"]);
    assert!(
        b.ignored.iter().any(|n| n.contains("_alumni")),
        "{:?}",
        b.ignored
    );
    assert!(
        b.ignored.iter().any(|n| n.contains("decisions")),
        "{:?}",
        b.ignored
    );
    assert!(b.skills.contains_key("skill-0"));
    let p = bundle::plan(
        &b,
        &bundle::ImportOptions {
            imported_at: "now".into(),
            date: "today".into(),
            builtin_skills: &[],
        },
    );
    let team = &p
        .files
        .iter()
        .find(|(f, _)| f.ends_with("team.md"))
        .unwrap()
        .1;
    assert_eq!(team.matches("## Project Context").count(), 1, "{team}");
    assert!(!team.contains("Old"), "{team}");
    assert!(team.contains("| Ana | Lead |"));
}

#[test]
fn routing_names_are_found_with_their_columns() {
    let r = "# R\n\n| Work Type | Agent | Examples |\n|---|---|---|\n| Core | EECOM 🔧 | x |\n| Docs | **Zed** ⚡ + PAO | y |\n| Ext | @copilot | z |\n\n| Module | Primary | Secondary |\n|--|--|--|\n| src | Flight | — |\n";
    let names = routing_agents(r);
    assert_eq!(
        names,
        vec![
            ("EECOM".to_string(), 5, 10),
            ("Zed".to_string(), 6, 10),
            ("PAO".to_string(), 6, 22),
            ("Flight".to_string(), 11, 9),
        ]
    );
}

#[test]
fn the_squad_cli_shape_keeps_whole_skill_folders_and_agent_skills_for_squadctl() {
    let text = r##"{"squad_format_version":"1.0","exported_at":"t","exported_from":{"project":"p","owner":"o"},
      "casting":{},"agents":{"ana":{"charter":"c","skills":{"own":{"files":{"SKILL.md":"---\nname: own\n---\n"}}}}},
      "team":"# T\n","routing":null,"ceremonies":"# C\n",
      "skills":{"multi":{"files":{"SKILL.md":"---\nname: multi\n---\n","scripts/run.sh":"echo\n"}},
                "YAML Front":{"files":{"SKILL.md":"---\nname: YAML Frontmatter Parsing!\n---\n"}}}}"##;
    let b = bundle::parse(text.as_bytes()).unwrap();
    let cli = bundle::Bundle {
        shape: Shape::SquadCli,
        ..b.clone()
    };
    let json = bundle::to_json(&cli);
    let back = bundle::parse(json.as_bytes()).unwrap();
    // The multi-file folder comes back whole, the agent's skill too.
    assert_eq!(back.skills["multi"], b.skills["multi"]);
    assert_eq!(back.agents["ana"].skills, b.agents["ana"].skills);
    // Its folder name too, whatever its front matter (issue 41.5)...
    assert_eq!(back.skills["YAML Front"], b.skills["YAML Front"]);
    // ...while a skill known only from the list (as the Squad CLI writes
    // it) is named as the Squad CLI names it.
    let mut v: serde_json::Value = serde_json::from_str(&json).unwrap();
    v.as_object_mut().unwrap().remove("skill_folders");
    let listed = bundle::parse(v.to_string().as_bytes()).unwrap();
    assert!(
        listed.skills.contains_key("yaml-frontmatter-parsing-"),
        "{:?}",
        listed.skills.keys()
    );
    let drops = bundle::squad_cli_drops(&cli).join("\n");
    for what in ["Project Context", "ceremonies.md", "scripts/run.sh", "own"] {
        assert!(drops.contains(what), "{what}: {drops}");
    }
}

#[test]
fn skill_slugs_follow_the_squad_cli() {
    assert_eq!(
        bundle::skill_slug("YAML Frontmatter Parsing").as_deref(),
        Some("yaml-frontmatter-parsing")
    );
    assert_eq!(bundle::skill_slug("  a  b ").as_deref(), Some("a-b"));
    assert_eq!(bundle::skill_slug(".hidden").as_deref(), Some("hidden"));
    assert_eq!(bundle::skill_slug("Ünïcode").as_deref(), Some("n-code"));
    assert_eq!(bundle::skill_slug("..."), None);
    assert!(bundle::squad_cli_accepts_agent("fido"));
    assert!(!bundle::squad_cli_accepts_agent("_alumni"));
    assert!(!bundle::squad_cli_accepts_agent("ünï"));
}

/// `read_team_with(Roster)` reads no history or decisions text yet reports
/// the same problems (a symlinked or oversized history still is one) and
/// counts the same files; `Agent` reads that one agent's history.
#[cfg(unix)]
#[test]
fn a_roster_read_probes_histories_and_decisions_without_reading_them() {
    use super::{Texts, read_team_with};
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("h.md"), "secret").unwrap();
    let team = dir.path().join(".squad");
    for a in ["ana", "bo"] {
        std::fs::create_dir_all(team.join("agents").join(a)).unwrap();
        std::fs::write(
            team.join("agents").join(a).join("charter.md"),
            "- **Role:** Lead\n",
        )
        .unwrap();
    }
    std::fs::write(
        team.join("team.md"),
        "## Members\n\n| Name | Role |\n|--|--|\n| Ana | Lead |\n| Bo | Lead |\n",
    )
    .unwrap();
    std::fs::write(team.join("decisions.md"), "### A\n\nbig\n".repeat(1000)).unwrap();
    std::fs::write(team.join("agents/ana/history.md"), "# History\n").unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("h.md"),
        team.join("agents/bo/history.md"),
    )
    .unwrap();
    let dir = crate::teamdir::locate(dir.path()).unwrap();
    let all = super::read_team(&dir);
    let roster = read_team_with(&dir, Texts::Roster);
    let ana = read_team_with(&dir, Texts::Agent("ana"));
    assert_eq!(roster.diagnostics, all.diagnostics);
    assert_eq!(ana.diagnostics, all.diagnostics);
    assert_eq!((roster.files, ana.files), (all.files, all.files));
    assert!(
        all.diagnostics
            .iter()
            .any(|d| d.path.ends_with("agents/bo/history.md")),
        "{:#?}",
        all.diagnostics
    );
    assert_eq!(roster.roster, all.roster);
    assert!(roster.decisions.is_none() && all.decisions.is_some());
    assert!(roster.agents.values().all(|a| a.history.is_none()));
    assert_eq!(ana.decisions, all.decisions);
    assert_eq!(ana.agents["ana"].history.as_deref(), Some("# History\n"));
    assert!(ana.agents["bo"].history.is_none());
}
