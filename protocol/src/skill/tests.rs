use super::*;
use crate::diagnostic::Severity;

/// (folder, SKILL.md text, rule ids in lenient mode, whether lenient loading keeps the skill)
const TABLE: &[(&str, &str, &[&str], bool)] = &[
    (
        "ok",
        "---\nname: ok\ndescription: Does things.\n---\nbody\n",
        &[],
        true,
    ),
    (
        "ok",
        "---\nname: ok\ndescription: d\nlicense: MIT\ncompatibility: Needs git\nmetadata:\n  version: \"1.0\"\nallowed-tools: Read Bash(git:*)\n---\n",
        &[],
        true,
    ),
    // skill-no-front-matter (loaded under its folder's name, as Squad does)
    (
        "x",
        "# Code Review\n\nNo front matter.\n",
        &["skill-no-front-matter"],
        true,
    ),
    ("x", "", &["skill-no-front-matter"], false),
    // skill-unclosed-front-matter
    (
        "x",
        "---\nname: x\ndescription: d\n",
        &["skill-unclosed-front-matter"],
        false,
    ),
    // skill-yaml-syntax
    (
        "x",
        "---\nname: x\ndescription: Use when: a colon\n---\n",
        &["skill-yaml-syntax"],
        false,
    ),
    ("x", "---\nname: [x\n---\n", &["skill-yaml-syntax"], false),
    // skill-not-a-mapping
    ("x", "---\n- a\n- b\n---\n", &["skill-not-a-mapping"], false),
    ("x", "---\n---\n", &["skill-not-a-mapping"], false),
    // skill-missing-description
    (
        "x",
        "---\nname: x\n---\n",
        &["skill-missing-description"],
        false,
    ),
    (
        "x",
        "---\nname: x\ndescription: \"  \"\n---\n",
        &["skill-missing-description"],
        false,
    ),
    (
        "x",
        "---\nname: x\ndescription: [a]\n---\n",
        &["skill-missing-description"],
        false,
    ),
    // skill-missing-name (the folder name stands in)
    (
        "x",
        "---\ndescription: d\n---\n",
        &["skill-missing-name"],
        true,
    ),
    (
        "x",
        "---\nname: 12\ndescription: d\n---\n",
        &["skill-missing-name"],
        true,
    ),
    // skill-name-format (+ mismatch, as the folder is named correctly)
    (
        "my-skill",
        "---\nname: My Skill\ndescription: d\n---\n",
        &["skill-name-format", "skill-name-mismatch"],
        true,
    ),
    (
        "-x",
        "---\nname: -x\ndescription: d\n---\n",
        &["skill-name-format"],
        true,
    ),
    (
        "x-",
        "---\nname: x-\ndescription: d\n---\n",
        &["skill-name-format"],
        true,
    ),
    (
        "a--b",
        "---\nname: a--b\ndescription: d\n---\n",
        &["skill-name-format"],
        true,
    ),
    (
        "a_b",
        "---\nname: a_b\ndescription: d\n---\n",
        &["skill-name-format"],
        true,
    ),
    // skill-name-mismatch
    (
        "folder",
        "---\nname: other\ndescription: d\n---\n",
        &["skill-name-mismatch"],
        true,
    ),
    // skill-description-angle
    (
        "x",
        "---\nname: x\ndescription: Use for <html> & more\n---\n",
        &["skill-description-angle"],
        true,
    ),
    // skill-field-type
    (
        "x",
        "---\nname: x\ndescription: d\nlicense: [MIT]\n---\n",
        &["skill-field-type"],
        true,
    ),
    (
        "x",
        "---\nname: x\ndescription: d\ncompatibility: 3\n---\n",
        &["skill-field-type"],
        true,
    ),
    (
        "x",
        "---\nname: x\ndescription: d\nmetadata: [a]\n---\n",
        &["skill-field-type"],
        true,
    ),
    // skill-metadata-value
    (
        "x",
        "---\nname: x\ndescription: d\nmetadata:\n  version: 1.0\n---\n",
        &["skill-metadata-value"],
        true,
    ),
    (
        "x",
        "---\nname: x\ndescription: d\nmetadata:\n  tags: [a, b]\n---\n",
        &["skill-metadata-value"],
        true,
    ),
    // skill-allowed-tools
    (
        "x",
        "---\nname: x\ndescription: d\nallowed-tools: [Read, Bash]\n---\n",
        &["skill-allowed-tools"],
        true,
    ),
    (
        "x",
        "---\nname: x\ndescription: d\nallowed-tools: {a: b}\n---\n",
        &["skill-allowed-tools"],
        true,
    ),
    // skill-unknown-field (Squad's own fields are known)
    (
        "x",
        "---\nname: x\ndescription: d\ncolour: blue\ndomain: testing\nconfidence: high\n---\n",
        &["skill-unknown-field"],
        true,
    ),
    // skill-invisible-text
    (
        "x",
        "---\nname: x\ndescription: \"d\u{200B}\"\n---\n",
        &["skill-invisible-text"],
        true,
    ),
];

#[test]
fn rules_table() {
    for (i, (folder, text, ids, kept)) in TABLE.iter().enumerate() {
        let path = PathBuf::from(format!("skills/{folder}/SKILL.md"));
        let lenient = check_text(&path, text, false);
        let got: Vec<&str> = lenient.diagnostics.iter().map(|d| d.rule.id()).collect();
        assert_eq!(&got, ids, "row {i}: {text:?}");
        assert_eq!(lenient.skill.is_some(), *kept, "row {i}: {text:?}");
        // Lenient: only what skips a skill is an error.
        assert_eq!(
            lenient.has_errors(),
            !kept,
            "row {i}: {:?}",
            lenient.diagnostics
        );
        // Strict: every finding is an error.
        let strict = check_text(&path, text, true);
        assert_eq!(strict.diagnostics.len(), ids.len(), "row {i}");
        assert!(
            strict
                .diagnostics
                .iter()
                .all(|d| d.severity == Severity::Error)
        );
        for d in &strict.diagnostics {
            assert!(d.location.is_some(), "row {i}: {d:?} has no position");
            assert!(!d.hint.is_empty());
        }
    }
}

#[test]
fn every_skill_rule_is_exercised() {
    let covered: std::collections::BTreeSet<&str> =
        TABLE.iter().flat_map(|r| r.2.iter().copied()).collect();
    // Exercised elsewhere: lengths (below), and discovery's rules
    // (missing-file, not-regular, shadowed) in discover tests and the e2e test.
    let elsewhere = [
        "skill-description-too-long",
        "skill-compatibility-too-long",
        "skill-missing-file",
        "skill-not-regular",
        "skill-shadowed",
    ];
    for r in Rule::ALL.iter().filter(|r| r.id().starts_with("skill-")) {
        assert!(
            covered.contains(r.id()) || elsewhere.contains(&r.id()),
            "{} has no table row",
            r.id()
        );
    }
}

#[test]
fn length_limits_count_characters() {
    let path = Path::new("s/x/SKILL.md");
    let ok = format!("---\nname: x\ndescription: {}\n---\n", "é".repeat(1024));
    assert!(check_text(path, &ok, true).diagnostics.is_empty());
    let long = format!("---\nname: x\ndescription: {}\n---\n", "é".repeat(1025));
    let r = check_text(path, &long, false);
    assert_eq!(r.diagnostics[0].rule, Rule::SkillDescriptionTooLong);
    assert!(r.skill.is_some());
    let comp = format!(
        "---\nname: x\ndescription: d\ncompatibility: {}\n---\n",
        "c".repeat(501)
    );
    assert_eq!(
        check_text(path, &comp, false).diagnostics[0].rule,
        Rule::SkillCompatibilityTooLong
    );
    let comp = format!(
        "---\nname: x\ndescription: d\ncompatibility: {}\n---\n",
        "c".repeat(500)
    );
    assert!(check_text(path, &comp, true).diagnostics.is_empty());
    let name = "a".repeat(65);
    let text = format!("---\nname: {name}\ndescription: d\n---\n");
    let r = check_text(&PathBuf::from(format!("s/{name}/SKILL.md")), &text, false);
    assert_eq!(r.diagnostics[0].rule, Rule::SkillNameFormat);
    let name = "ä".repeat(64);
    let text = format!("---\nname: {name}\ndescription: d\n---\n");
    assert!(
        check_text(&PathBuf::from(format!("s/{name}/SKILL.md")), &text, true)
            .diagnostics
            .is_empty()
    );
}

#[test]
fn positions_point_into_the_file() {
    let text = "---\nname: x\ndescription: d\nmetadata:\n  version: 2\ncolour: t\n---\n";
    let r = check_text(Path::new("s/x/SKILL.md"), text, false);
    let at: Vec<(&str, u32, u32)> = r
        .diagnostics
        .iter()
        .map(|d| {
            let l = d.location.unwrap();
            (d.rule.id(), l.line, l.column)
        })
        .collect();
    assert_eq!(
        at,
        [
            ("skill-metadata-value", 5, 12),
            ("skill-unknown-field", 6, 1)
        ]
    );
    let bad = check_text(
        Path::new("s/x/SKILL.md"),
        "---\nname: x\ndescription: a: b\n---\n",
        false,
    );
    assert_eq!(bad.diagnostics[0].location.unwrap().line, 3);
}

#[test]
fn mcp_servers_from_metadata_string_structured_list_and_tools() {
    let text = "---\nname: db\ndescription: d\nmetadata:\n  mcp-servers: \"postgres azure-devops?\"\n  mcp-postgres-purpose: Query the schema\n  mcp-azure-devops-fallback: Skip work item links\n---\n";
    let s = check_text(Path::new("s/db/SKILL.md"), text, true)
        .skill
        .unwrap();
    assert_eq!(
        s.mcp_servers,
        [
            McpServer {
                name: "postgres".into(),
                required: true,
                purpose: Some("Query the schema".into()),
                fallback: None
            },
            McpServer {
                name: "azure-devops".into(),
                required: false,
                purpose: None,
                fallback: Some("Skip work item links".into())
            },
        ]
    );
    // Proposal 012's structured list (not standard: a warning, still honoured).
    let text = "---\nname: db\ndescription: d\nmetadata:\n  mcp-servers:\n    - name: postgres\n      reason: schema\n    - name: azure-devops\n      optional: true\n      fallback: skip\n---\n";
    let r = check_text(Path::new("s/db/SKILL.md"), text, false);
    assert_eq!(r.diagnostics[0].rule, Rule::SkillMetadataValue);
    let s = r.skill.unwrap();
    assert_eq!(s.mcp_servers.len(), 2);
    assert!(s.mcp_servers[0].required && !s.mcp_servers[1].required);
    assert_eq!(s.mcp_servers[1].fallback.as_deref(), Some("skip"));
    // Squad's `tools:` list (templates/skill.md).
    let text = "---\nname: gh\ndescription: d\ntools:\n  - name: github\n    description: Reads PRs\n    when: reviewing\n---\n";
    let s = check_text(Path::new("s/gh/SKILL.md"), text, false)
        .skill
        .unwrap();
    assert_eq!(s.mcp_servers[0].name, "github");
    assert_eq!(
        s.mcp_servers[0].purpose.as_deref(),
        Some("Reads PRs (when: reviewing)")
    );
}

#[test]
fn name_rules() {
    for ok in ["a", "pdf-processing", "v2", "数据", "ünïcode-ok"] {
        assert_eq!(name_problem(ok), None, "{ok}");
    }
    for bad in ["", "A", "a_b", "-a", "a-", "a--b", "a b", "a.b"] {
        assert!(name_problem(bad).is_some(), "{bad}");
    }
}

#[test]
fn discovery_precedence_and_shadowing_for_an_agent() {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    let put = |rel: &str, name: &str| {
        let p = r.join(rel).join(name);
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(
            p.join("SKILL.md"),
            format!("---\nname: {name}\ndescription: d\n---\n"),
        )
        .unwrap();
    };
    std::fs::create_dir_all(r.join(".squad")).unwrap();
    put(".agents/skills", "a");
    put(".github/skills", "a");
    put(".squad/agents/ana/skills", "b");
    put(".claude/skills", "b");
    let d = discover::discover(r, Some("ana"), false);
    let got: Vec<(&str, &str)> = d
        .skills
        .iter()
        .map(|f| (f.skill.name.as_str(), f.place.as_str()))
        .collect();
    assert_eq!(
        got,
        [("b", ".squad/agents/ana/skills"), ("a", ".github/skills")]
    );
    let shadowed: Vec<(&str, Option<&str>)> = d
        .shadowed
        .iter()
        .map(|s| (s.skill.location.as_str(), s.for_agent.as_deref()))
        .collect();
    assert_eq!(
        shadowed,
        [
            (".claude/skills/b/SKILL.md", Some("ana")),
            (".agents/skills/a/SKILL.md", None),
        ]
    );
    assert!(d.diagnostics[0].message.contains("for agent `ana`"));
    assert!(!d.diagnostics[1].message.contains("for agent"));
    // Without the agent: the team's only, nothing of ana's.
    let d = discover::discover(r, None, false);
    assert_eq!(d.skills.len(), 2);
    assert_eq!(d.skills[1].place, ".claude/skills");
}

#[test]
fn squads_own_fields_are_known_and_a_skill_without_front_matter_loads_as_squad_loads_it() {
    let text = "---\nname: x\ndescription: d\ndomain: testing\nconfidence: high\nsource: earned\ntriggers: [vitest]\nroles: [tester]\n---\n";
    let r = check_text(Path::new("s/x/SKILL.md"), text, false);
    assert!(r.diagnostics.is_empty(), "{:?}", r.diagnostics);
    let r = check_text(Path::new("s/x/SKILL.md"), text, true);
    assert!(r.diagnostics.is_empty(), "{:?}", r.diagnostics);

    let text = "# Skill: Code Review\n\nAutomated code review\nwith style checks.\n\n## More\n";
    let r = check_text(Path::new("s/code-review/SKILL.md"), text, false);
    let skill = r.skill.expect("loaded");
    assert_eq!(skill.name, "code-review");
    assert_eq!(
        skill.description,
        "Automated code review with style checks."
    );
    assert_eq!(r.diagnostics.len(), 1);
    assert_eq!(r.diagnostics[0].rule.id(), "skill-no-front-matter");
    assert_eq!(r.diagnostics[0].severity, Severity::Warning);
    let r = check_text(Path::new("s/code-review/SKILL.md"), text, true);
    assert!(r.skill.is_none() && r.has_errors());
    // Only a title: the title describes it. Empty: not a skill.
    let r = check_text(Path::new("s/t/SKILL.md"), "# Skill: Tidy\n", false);
    assert_eq!(r.skill.unwrap().description, "Tidy");
    let r = check_text(Path::new("s/t/SKILL.md"), "", false);
    assert!(r.skill.is_none() && r.has_errors());
}

#[test]
fn invisible_text_in_a_description_is_flagged_and_escaped_in_the_prompt() {
    for hidden in [
        "\u{E0041}\u{E0042}",
        "\u{202E}",
        "\u{2066}",
        "\u{200B}",
        "\u{FEFF}",
    ] {
        let text = format!("---\nname: x\ndescription: \"Formats code.{hidden}\"\n---\n");
        let r = check_text(Path::new("s/x/SKILL.md"), &text, false);
        assert_eq!(r.diagnostics.len(), 1, "{hidden:?}: {:?}", r.diagnostics);
        assert_eq!(r.diagnostics[0].rule.id(), "skill-invisible-text");
        assert_eq!(r.diagnostics[0].severity, Severity::Warning);
        assert_eq!(r.diagnostics[0].location.map(|l| l.line), Some(3));
        let strict = check_text(Path::new("s/x/SKILL.md"), &text, true);
        assert!(strict.has_errors());
        let skill = r.skill.unwrap();
        let block = prompt::available_skills(&[prompt::Entry {
            skill: &skill,
            location: "s/x/SKILL.md",
        }]);
        assert!(!block.chars().any(is_invisible), "{block:?}");
        assert!(block.contains("Formats code.&#x"), "{block}");
    }
}
