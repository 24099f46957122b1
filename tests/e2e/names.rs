//! Agent names compared after Unicode normalization (issue 39 item 7): a
//! name typed composed (`café`, U+00E9) and decomposed (`cafe` + U+0301)
//! looks the same and must be one agent, never two.

use crate::support::*;

/// `café` composed and decomposed.
const NFC: &str = "caf\u{e9}";
const NFD: &str = "cafe\u{301}";

/// A team file with two agents, `café` in each normal form, is refused
/// before anything is written (two agent folders that look alike would
/// be two agents). Before issue 39 both imported.
#[test]
fn an_import_with_one_name_in_two_normal_forms_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("project");
    std::fs::create_dir_all(&p).unwrap();
    let team = r##""team":"# T\n\n## Members\n\n| Name | Role |\n|--|--|\n| Ana | Lead |\n""##;
    let file = tmp.path().join("team.json");
    std::fs::write(
        &file,
        format!(
            r##"{{"squad_format_version":"1.0","casting":{{}},"agents":{{"{NFC}":{{"charter":"one"}},"{NFD}":{{"charter":"two"}}}},{team}}}"##
        ),
    )
    .unwrap();
    let o = run(ctl_root(&p).arg("import").arg(&file));
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("Unicode normalization"),
        "{}",
        stderr(&o)
    );
    assert!(
        std::fs::read_dir(&p).unwrap().next().is_none(),
        "a refused import wrote"
    );
    // One spelling alone imports.
    std::fs::write(
        &file,
        format!(
            r##"{{"squad_format_version":"1.0","casting":{{}},"agents":{{"{NFD}":{{"charter":"one"}}}},{team}}}"##
        ),
    )
    .unwrap();
    let o = run(ctl_root(&p).arg("import").arg(&file));
    assert_eq!(code(&o), 0, "{}", stderr(&o));
}

/// Where an agent acts (locks, inbox, presence, the MCP server), its name
/// is a protocol agent id, ASCII only: neither spelling of `café` is an
/// agent there, so no two agents can differ only by normalization.
#[test]
fn neither_spelling_of_a_non_ascii_name_is_an_agent_where_agents_act() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    ctl_ok(root, &["init"]);
    for name in [NFC, NFD] {
        for args in [
            vec![
                "lock", "acquire", "src/a.rs", "--agent", name, "--task", "task_1",
            ],
            vec!["mcp", "--agent", name],
        ] {
            let o = run(ctl(root).args(&args));
            assert_ne!(code(&o), 0, "{args:?}");
            assert!(
                stderr(&o).contains("not a valid agent name") || stderr(&o).contains("agent name"),
                "{args:?}: {}",
                stderr(&o)
            );
        }
    }
    assert!(
        !root.join(".squad/run/locks").exists()
            || std::fs::read_dir(root.join(".squad/run/locks"))
                .unwrap()
                .next()
                .is_none(),
        "a lock was taken"
    );
}
