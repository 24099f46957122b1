//! `squadctl skills …` through the real binary: discovery over every skill
//! place, the prompt block, built-in upgrades, scaffolding.

use crate::support::*;
use serde_json::Value;
use std::fs;
use std::path::Path;

fn skill(name: &str, description: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\n---\n# {name}\n\nInstructions.\n")
}

fn json(out: &std::process::Output) -> Value {
    serde_json::from_str(&stdout(out))
        .unwrap_or_else(|e| panic!("{e}: {}{}", stdout(out), stderr(out)))
}

/// A project with skills in all five places, an agent skill, a shadowed
/// duplicate, a SKILL.md without front matter and one with invalid YAML.
fn five_places() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    fs::create_dir_all(r.join(".squad/sessions")).unwrap();
    for (place, name, description) in [
        (".squad/skills", "alpha", "Team alpha."),
        (".github/skills", "beta", "Beta from GitHub."),
        (".copilot/skills", "gamma", "Gamma from Copilot."),
        (".claude/skills", "delta", "Delta from Claude."),
        (".agents/skills", "epsilon", "Epsilon from agents."),
        // Shadowed: alpha again, lower in precedence.
        (".claude/skills", "alpha", "A second alpha."),
        // An agent's own skill, and one overriding a team skill for that agent.
        (".squad/agents/ana/skills", "zeta", "Ana's zeta."),
        (".squad/agents/ana/skills", "beta", "Ana's own beta."),
    ] {
        write(
            r,
            &format!("{place}/{name}/SKILL.md"),
            &skill(name, description),
        );
    }
    write(r, ".squad/agents/bob/charter.md", "# Bob\n");
    // Broken ones: reported, skipped, never a crash.
    for (path, text) in [
        // Empty: no text to load (one with text loads as Squad loads it,
        // see interop.rs).
        (".github/skills/no-front/SKILL.md", ""),
        (
            ".agents/skills/bad-yaml/SKILL.md",
            "---\nname: bad-yaml\ndescription: Use when: colon\n---\n",
        ),
        (".copilot/skills/empty-folder/README.md", "no skill here\n"),
    ] {
        write(r, path, text);
    }
    dir
}

fn names(v: &Value, key: &str) -> Vec<String> {
    v[key]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let s = if key == "shadowed" { &f["skill"] } else { f };
            format!(
                "{}@{}",
                s["skill"]["name"].as_str().unwrap(),
                s["location"].as_str().unwrap()
            )
        })
        .collect()
}

fn rules(v: &Value) -> Vec<(String, String)> {
    v["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["rule"].as_str().unwrap().to_string(),
                d["path"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn discovery_over_all_five_places_agents_shadowing_and_broken_files() {
    let dir = five_places();
    let r = dir.path();
    let out = ctl_run(r, &["skills", "list", "--json"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let v = json(&out);
    assert_eq!(
        names(&v, "skills"),
        [
            "alpha@.squad/skills/alpha/SKILL.md",
            "beta@.github/skills/beta/SKILL.md",
            "gamma@.copilot/skills/gamma/SKILL.md",
            "delta@.claude/skills/delta/SKILL.md",
            "epsilon@.agents/skills/epsilon/SKILL.md",
            "beta@.squad/agents/ana/skills/beta/SKILL.md",
            "zeta@.squad/agents/ana/skills/zeta/SKILL.md",
        ]
    );
    assert_eq!(
        names(&v, "shadowed"),
        [
            "alpha@.claude/skills/alpha/SKILL.md",
            "beta@.github/skills/beta/SKILL.md",
        ]
    );
    assert_eq!(v["shadowed"][1]["for_agent"], "ana");
    let mut got = rules(&v);
    got.sort();
    assert_eq!(
        got,
        [
            (
                "skill-missing-file".into(),
                ".copilot/skills/empty-folder".into()
            ),
            (
                "skill-no-front-matter".into(),
                ".github/skills/no-front/SKILL.md".into()
            ),
            (
                "skill-shadowed".into(),
                ".claude/skills/alpha/SKILL.md".into()
            ),
            (
                "skill-shadowed".into(),
                ".github/skills/beta/SKILL.md".into()
            ),
            (
                "skill-yaml-syntax".into(),
                ".agents/skills/bad-yaml/SKILL.md".into()
            ),
        ]
    );

    // One agent's view: its own skills first, then the team's.
    let out = ctl_run(r, &["skills", "list", "--agent", "ana", "--json"]);
    let v = json(&out);
    assert_eq!(
        names(&v, "skills"),
        [
            "beta@.squad/agents/ana/skills/beta/SKILL.md",
            "zeta@.squad/agents/ana/skills/zeta/SKILL.md",
            "alpha@.squad/skills/alpha/SKILL.md",
            "gamma@.copilot/skills/gamma/SKILL.md",
            "delta@.claude/skills/delta/SKILL.md",
            "epsilon@.agents/skills/epsilon/SKILL.md",
        ]
    );
    // Bob has no skills of his own: the team's.
    let out = ctl_run(r, &["skills", "list", "--agent", "bob", "--json"]);
    assert_eq!(json(&out)["skills"].as_array().unwrap().len(), 5);

    // Human listing names the shadowed ones and counts the problems.
    let out = ctl_run(r, &["skills", "list"]);
    let text = stdout(&out);
    assert!(text.contains("shadowed: alpha at .claude/skills/alpha/SKILL.md (hidden by .squad/skills/alpha/SKILL.md)"), "{text}");
    assert!(text.contains("2 skipped, 3 warnings"), "{text}");

    // validate: positions, rule ids, hints; errors for the skipped ones.
    let out = ctl_run(r, &["skills", "validate", "--color", "never"]);
    assert_eq!(code(&out), 1);
    let text = stdout(&out);
    assert!(
        text.contains(".github/skills/no-front/SKILL.md:1:1: error[skill-no-front-matter]"),
        "{text}"
    );
    assert!(
        text.contains(".agents/skills/bad-yaml/SKILL.md:3:"),
        "{text}"
    );
    assert!(text.contains("error[skill-yaml-syntax]"), "{text}");
    assert!(text.contains("= hint: "), "{text}");
    assert!(
        text.ends_with("2 errors, 3 warnings in 10 files (0 sessions)\n"),
        "{text}"
    );

    // squadctl validate includes the project's skills.
    let out = ctl_run(r, &["validate", "--format", "json"]);
    assert_eq!(code(&out), 1, "{}", stdout(&out));
    let v = json(&out);
    assert!(rules(&v).iter().any(|(r, _)| r == "skill-yaml-syntax"));

    // show: fields, location, the shadowed copy and the text.
    let out = ctl_run(r, &["skills", "show", "alpha"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("location:      .squad/skills/alpha/SKILL.md"),
        "{text}"
    );
    assert!(
        text.contains("shadows:       .claude/skills/alpha/SKILL.md"),
        "{text}"
    );
    assert!(text.ends_with("# alpha\n\nInstructions.\n"), "{text}");
    let out = ctl_run(r, &["skills", "show", "nope"]);
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("no skill `nope`"), "{}", stderr(&out));
}

#[test]
fn validate_paths_and_strict() {
    let dir = five_places();
    let r = dir.path();
    // A single skill folder, a SKILL.md, a directory of skills.
    let out = ctl_run(r, &["skills", "validate", ".squad/skills/alpha"]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    let out = ctl_run(
        r,
        &words("skills validate .agents/skills/bad-yaml/SKILL.md"),
    );
    assert_eq!(code(&out), 1);
    let out = ctl_run(r, &["skills", "validate", ".github/skills", "--json"]);
    let v = json(&out);
    assert_eq!(v["files_checked"], 2);
    assert_eq!(v["errors"], 1);
    // A warning in lenient mode is an error with --strict.
    write(
        r,
        "loose/mine/SKILL.md",
        "---\nname: mine\ndescription: d\ncolour: x\n---\n",
    );
    let out = ctl_run(r, &["skills", "validate", "loose/mine"]);
    assert_eq!(code(&out), 0);
    let out = ctl_run(
        r,
        &words("skills validate --strict --format github loose/mine"),
    );
    assert_eq!(code(&out), 1);
    assert!(
        stdout(&out).starts_with("::error file=loose/mine/SKILL.md,line=4,col=1"),
        "{}",
        stdout(&out)
    );
    let out = ctl_run(r, &["skills", "validate", "no/such/path"]);
    assert_eq!(code(&out), 2);
    // `squadctl validate` takes skill paths too (lenient), beside protocol files.
    let out = ctl_run(
        r,
        &words(
            "validate --format json .agents/skills/bad-yaml/SKILL.md .claude/skills .squad/skills/alpha",
        ),
    );
    assert_eq!(code(&out), 1, "{}{}", stdout(&out), stderr(&out));
    let v = json(&out);
    assert_eq!(v["files_checked"], 4, "{v:#}");
    assert_eq!(
        rules(&v),
        [(
            "skill-yaml-syntax".to_string(),
            ".agents/skills/bad-yaml/SKILL.md".to_string()
        )]
    );
}

// ---------------------------------------------------------------------------
// The prompt block
// ---------------------------------------------------------------------------

/// A minimal XML reader for the block: elements without attributes, text
/// with the five predefined entities. Panics on anything not well-formed.
fn parse_xml(text: &str) -> Vec<(String, String)> {
    let mut stack: Vec<String> = Vec::new();
    let mut leaves = Vec::new();
    let mut rest = text.trim();
    let mut pending = String::new();
    while !rest.is_empty() {
        if let Some(tail) = rest.strip_prefix('<') {
            let end = tail.find('>').expect("unclosed tag");
            let tag = &tail[..end];
            assert!(!tag.contains(['<', '&', '"', '\'', ' ']), "bad tag {tag:?}");
            if let Some(name) = tag.strip_prefix('/') {
                let open = stack.pop().expect("close without open");
                assert_eq!(open, name, "mismatched close");
                if !pending.trim().is_empty() {
                    leaves.push((name.to_string(), std::mem::take(&mut pending)));
                }
                pending.clear();
            } else {
                stack.push(tag.to_string());
                pending.clear();
            }
            rest = &tail[end + 1..];
        } else {
            let end = rest.find('<').unwrap_or(rest.len());
            let raw = &rest[..end];
            assert!(!raw.contains('>'), "unescaped > in {raw:?}");
            let mut decoded = String::new();
            let mut r = raw;
            while let Some(i) = r.find('&') {
                decoded.push_str(&r[..i]);
                let semi = r[i..].find(';').expect("entity without ;") + i;
                decoded.push_str(match &r[i + 1..semi] {
                    "amp" => "&",
                    "lt" => "<",
                    "gt" => ">",
                    "quot" => "\"",
                    "apos" => "'",
                    e => panic!("unknown entity &{e};"),
                });
                r = &r[semi + 1..];
            }
            decoded.push_str(r);
            pending.push_str(&decoded);
            rest = &rest[end..];
        }
    }
    assert!(stack.is_empty(), "unclosed elements {stack:?}");
    leaves
}

fn prompt_project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    fs::create_dir_all(r.join(".squad/agents/fenster")).unwrap();
    write(
        r,
        ".squad/skills/db-schema/SKILL.md",
        "---\nname: db-schema\ndescription: Manage schema migrations & models; \"safe\" by default, won't drop <tables>.\nmetadata:\n  version: \"1.0\"\n  mcp-servers: \"postgres filesystem azure-devops?\"\n  mcp-postgres-purpose: Query the schema, validate migrations\n  mcp-azure-devops-purpose: Link work items\n  mcp-azure-devops-fallback: Skip work item linking | note it\n---\nBody.\n",
    );
    write(
        r,
        ".github/skills/pr-review/SKILL.md",
        "---\nname: \"pr-review\"\ndescription: \"Review pull requests\"\ndomain: \"review\"\ntools:\n  - name: \"github\"\n    description: \"Reads PRs and comments\"\n    when: \"a PR is named\"\n---\n",
    );
    write(
        r,
        ".squad/agents/fenster/skills/api-design/SKILL.md",
        "---\nname: api-design\ndescription: REST API conventions.\nmetadata:\n  mcp-servers:\n    - name: openapi\n      reason: Lint specs\n      optional: true\n---\n",
    );
    dir
}

#[test]
fn prompt_block_snapshot_parses_and_escapes() {
    let dir = prompt_project();
    let r = dir.path();
    let out = ctl_run(r, &["skills", "prompt", "--agent", "fenster"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    let snap = fixture("skills/prompt-fenster.txt");
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        fs::create_dir_all(snap.parent().unwrap()).unwrap();
        fs::write(&snap, &text).unwrap();
    }
    assert_eq!(text, fs::read_to_string(&snap).unwrap());

    // The block is well-formed XML whose text decodes to the descriptions.
    let block = &text[..text.find("</available_skills>").unwrap() + "</available_skills>".len()];
    let leaves = parse_xml(block);
    let get = |tag: &str| -> Vec<&str> {
        leaves
            .iter()
            .filter(|(t, _)| t == tag)
            .map(|(_, v)| v.as_str())
            .collect()
    };
    assert_eq!(get("name"), ["api-design", "db-schema", "pr-review"]);
    assert_eq!(
        get("description")[1],
        "Manage schema migrations & models; \"safe\" by default, won't drop <tables>."
    );
    assert!(
        block
            .contains("&amp; models; &quot;safe&quot; by default, won&apos;t drop &lt;tables&gt;.")
    );
    assert_eq!(
        get("location")[0],
        ".squad/agents/fenster/skills/api-design/SKILL.md"
    );
    let err = stderr(&out);
    assert!(err.contains("tokens for 3 skills (budget 2000)"), "{err}");
    assert!(!err.contains("warning: the skills block"), "{err}");

    // Past the policy budget: a warning, and the numbers in JSON.
    write(
        r,
        ".squad/policies.yaml",
        "skills:\n  prompt_budget_tokens: 50\n",
    );
    let out = ctl_run(r, &["skills", "prompt", "--agent", "fenster"]);
    assert_eq!(code(&out), 0);
    assert!(
        stderr(&out).contains("over the budget of 50 (policy skills.prompt_budget_tokens)"),
        "{}",
        stderr(&out)
    );
    let out = ctl_run(r, &["skills", "prompt", "--agent", "fenster", "--json"]);
    let v = json(&out);
    assert_eq!(v["budget_tokens"], 50);
    assert!(v["tokens"].as_u64().unwrap() > 50);
    assert!(v["warning"].as_str().unwrap().contains("over the budget"));
    let servers: Vec<(&str, &str, bool)> = v["mcp_servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["skill"].as_str().unwrap(),
                s["server"].as_str().unwrap(),
                s["required"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        servers,
        [
            ("api-design", "openapi", false),
            ("db-schema", "postgres", true),
            ("db-schema", "filesystem", true),
            ("db-schema", "azure-devops", false),
            ("pr-review", "github", true),
        ]
    );
    // Agent names never leave .squad/agents/.
    let out = ctl_run(r, &["skills", "prompt", "--agent", "../x"]);
    assert_eq!(code(&out), 2);
}

// ---------------------------------------------------------------------------
// Built-in skills
// ---------------------------------------------------------------------------

fn shipped(name: &str) -> String {
    fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("skills")
            .join(name)
            .join("SKILL.md"),
    )
    .unwrap()
}

/// Lays down an "older" installed built-in: its text and a matching record.
fn install_old(r: &Path, name: &str) -> String {
    let text = format!(
        "---\nname: {name}\ndescription: Old text.\nmetadata:\n  version: \"0.0.1\"\n---\nold\n"
    );
    write(r, &format!(".squad/skills/{name}/SKILL.md"), &text);
    let record = serde_json::json!({
        "skill": name,
        "version": "0.0.1",
        "fnv1a64": squad_supervisor::skills::fnv1a64(text.as_bytes()),
    });
    write(
        r,
        &format!(".squad/skills/{name}/.squad-builtin.json"),
        &record.to_string(),
    );
    text
}

#[test]
fn upgrade_installs_replaces_and_leaves_modified_and_learned_skills_alone() {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    fs::create_dir_all(r.join(".squad")).unwrap();
    let learned = skill("my-learned", "Learned by an agent.");
    write(r, ".squad/skills/my-learned/SKILL.md", &learned);
    write(
        r,
        ".squad/agents/ana/skills/squad-protocol/SKILL.md",
        &skill("squad-protocol", "Ana's own."),
    );

    // Fresh: both built-ins installed, valid, recorded.
    let out = ctl_run(r, &["skills", "upgrade", "--json"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let v = json(&out);
    let actions: Vec<&str> = v["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["installed", "installed"]);
    for name in ["squad-protocol", "squad-memory-format"] {
        assert_eq!(
            fs::read_to_string(r.join(format!(".squad/skills/{name}/SKILL.md"))).unwrap(),
            shipped(name)
        );
        assert!(
            r.join(format!(".squad/skills/{name}/.squad-builtin.json"))
                .is_file()
        );
    }
    let out = ctl_run(
        r,
        &words(
            "skills validate --strict .squad/skills/squad-protocol .squad/skills/squad-memory-format",
        ),
    );
    assert_eq!(code(&out), 0, "{}", stdout(&out));

    // Again: nothing to do.
    let before = snapshot(r);
    let out = ctl_run(r, &["skills", "upgrade"]);
    assert!(
        stdout(&out).contains("0 built-in skills installed or replaced"),
        "{}",
        stdout(&out)
    );
    assert_eq!(snapshot(r), before);

    // The user edits squad-protocol; squad-memory-format is an older install.
    let modified = format!("{}\nMy team's extra rule.\n", shipped("squad-protocol"));
    write(r, ".squad/skills/squad-protocol/SKILL.md", &modified);
    install_old(r, "squad-memory-format");

    // Dry run: says what it would do, changes nothing.
    let before = snapshot(r);
    let out = ctl_run(r, &["skills", "upgrade", "--dry-run"]);
    assert_eq!(code(&out), 0);
    let text = stdout(&out);
    assert!(
        text.contains("squad-memory-format: would replace version 0.0.1 with"),
        "{text}"
    );
    assert!(
        text.contains("squad-protocol: changed since version"),
        "{text}"
    );
    assert!(text.contains("(dry run: nothing written)"), "{text}");
    assert_eq!(snapshot(r), before);

    let out = ctl_run(r, &["skills", "upgrade", "--json"]);
    let v = json(&out);
    let actions: Vec<(&str, &str)> = v["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["skill"].as_str().unwrap(), s["action"].as_str().unwrap()))
        .collect();
    assert_eq!(
        actions,
        [
            ("squad-protocol", "modified"),
            ("squad-memory-format", "replaced")
        ]
    );
    // The modified built-in and the learned skills are byte-identical.
    assert_eq!(
        fs::read_to_string(r.join(".squad/skills/squad-protocol/SKILL.md")).unwrap(),
        modified
    );
    assert_eq!(
        fs::read_to_string(r.join(".squad/skills/my-learned/SKILL.md")).unwrap(),
        learned
    );
    assert_eq!(
        fs::read_to_string(r.join(".squad/agents/ana/skills/squad-protocol/SKILL.md")).unwrap(),
        skill("squad-protocol", "Ana's own.")
    );
    // The old one is replaced, its record updated.
    assert_eq!(
        fs::read_to_string(r.join(".squad/skills/squad-memory-format/SKILL.md")).unwrap(),
        shipped("squad-memory-format")
    );
    let record: Value = serde_json::from_str(
        &fs::read_to_string(r.join(".squad/skills/squad-memory-format/.squad-builtin.json"))
            .unwrap(),
    )
    .unwrap();
    assert_ne!(record["version"], "0.0.1");

    // A same-named skill squadctl never installed (no record) is left alone.
    fs::remove_file(r.join(".squad/skills/squad-memory-format/.squad-builtin.json")).unwrap();
    let mine = skill("squad-memory-format", "Hand-written.");
    write(r, ".squad/skills/squad-memory-format/SKILL.md", &mine);
    let out = ctl_run(r, &["skills", "upgrade"]);
    assert!(
        stdout(&out).contains(
            "squad-memory-format: a skill of this name that squadctl did not install; left alone"
        ),
        "{}",
        stdout(&out)
    );
    assert_eq!(
        fs::read_to_string(r.join(".squad/skills/squad-memory-format/SKILL.md")).unwrap(),
        mine
    );
}

#[test]
fn upgrade_without_a_team_directory_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(ctl_root(dir.path()).args(["skills", "upgrade"]));
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("squadctl init"), "{}", stderr(&out));
}

#[test]
fn new_scaffolds_a_valid_skill() {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    fs::create_dir_all(r.join(".squad")).unwrap();
    let out = ctl_run(
        r,
        &[
            "skills",
            "new",
            "api-design",
            "--description",
            "REST API conventions: \"use when\" designing",
        ],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let out = ctl_run(
        r,
        &words("skills validate --strict .squad/skills/api-design"),
    );
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    let out = ctl_run(r, &["skills", "show", "api-design", "--json"]);
    assert_eq!(
        json(&out)["skill"]["skill"]["description"],
        "REST API conventions: \"use when\" designing"
    );
    // An agent's own, without a description: still valid.
    let out = ctl_run(r, &["skills", "new", "notes", "--agent", "ana"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let out = ctl_run(
        r,
        &words("skills validate --strict .squad/agents/ana/skills/notes"),
    );
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    // Refusals: bad names, existing skills.
    for args in [
        ["skills", "new", "Bad_Name"],
        ["skills", "new", "api-design"],
    ] {
        let out = run(squadctl().args(args).current_dir(r));
        assert_eq!(code(&out), 2, "{args:?}");
    }
    let out = ctl_run(r, &["skills", "new", "x", "--description", "has <angle>"]);
    assert_eq!(code(&out), 2);
    assert!(!r.join(".squad/skills/x").exists());
}

// ---------------------------------------------------------------------------
// squadd
// ---------------------------------------------------------------------------

fn skills_status(root: &Path) -> Value {
    let v = status_json(root);
    assert_eq!(v["daemon"]["state"], "running", "{v:#}");
    v["roots"][0]["skills"].clone()
}

#[test]
fn squadd_watches_skill_directories_and_reports_problems_in_status() {
    use crate::daemon::{Daemon, eventually};
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    fs::create_dir_all(r.join(".squad/sessions")).unwrap();
    write(r, ".squad/skills/alpha/SKILL.md", &skill("alpha", "Alpha."));
    let daemon = Daemon::start(r);
    let s = skills_status(r);
    assert_eq!(
        (s["loaded"].as_u64(), s["errors"].as_u64()),
        (Some(1), Some(0)),
        "{s}"
    );

    // A new place (.claude/skills did not exist) with a broken skill.
    write(r, ".claude/skills/broken/SKILL.md", "");
    let s = eventually("the broken skill in status", || {
        let s = skills_status(r);
        (s["errors"] == 1).then_some(s)
    });
    assert!(
        s["problems"][0]
            .as_str()
            .unwrap()
            .starts_with(".claude/skills/broken/SKILL.md:1:1: error[skill-no-front-matter]"),
        "{s}"
    );
    let out = ctl_run(r, &["status", "--check"]);
    assert_eq!(code(&out), 1, "{}", stdout(&out));
    // Editing the SKILL.md in place fixes it.
    write(
        r,
        ".claude/skills/broken/SKILL.md",
        &skill("broken", "Fixed."),
    );
    eventually("the fix in status", || {
        let s = skills_status(r);
        (s["errors"] == 0 && s["loaded"] == 2).then_some(())
    });
    let out = ctl_run(r, &["status", "--check"]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    // An agent's new skill, and a shadowing duplicate.
    write(
        r,
        ".squad/agents/ana/skills/alpha/SKILL.md",
        &skill("alpha", "Ana's alpha."),
    );
    let s = eventually("the agent skill in status", || {
        let s = skills_status(r);
        (s["shadowed"] == 1).then_some(s)
    });
    assert_eq!(s["loaded"], 3, "{s}");
    let human = stdout(&ctl_run(r, &["status"]));
    assert!(
        human.contains("skills: 3 loaded, 0 skipped, 1 warning, 1 shadowed"),
        "{human}"
    );
    let (code, log) = daemon.terminate();
    assert_eq!(code, 0, "{log}");
}

#[test]
fn check_reports_a_skill_agents_would_never_see() {
    let tmp = tempfile::tempdir().unwrap();
    let r = tmp.path();
    copy_tree(&fixture("seed"), r);
    write(
        r,
        ".github/skills/review/SKILL.md",
        "---\nname: review\n---\n",
    );
    fs::write(r.join("changed.txt"), "backend/src/routes/users.ts\n").unwrap();
    let out = ctl_run(
        r,
        &words("check --changed changed.txt --task task_001 --format json"),
    );
    assert_eq!(code(&out), 1, "{}{}", stdout(&out), stderr(&out));
    let v = json(&out);
    assert_eq!(
        rules(&v),
        [(
            "skill-missing-description".to_string(),
            ".github/skills/review/SKILL.md".to_string()
        )]
    );
}

#[test]
fn terminal_output_escapes_control_characters_from_skill_files() {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    fs::create_dir_all(r.join(".squad")).unwrap();
    write(
        r,
        ".squad/skills/evil/SKILL.md",
        "---\nname: evil\ndescription: \"Looks fine\\e[2J\\e]0;pwned\\a\"\n---\nbody \u{1b}[31mred\n",
    );
    for args in [
        &["skills", "list"][..],
        &["skills", "show", "evil"],
        &["skills", "prompt", "--agent", "x"],
    ] {
        let out = run(squadctl().args(args).current_dir(r));
        assert_eq!(code(&out), 0, "{args:?}: {}", stderr(&out));
        let text = stdout(&out);
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{7}'),
            "{args:?}: {text:?}"
        );
    }
}
