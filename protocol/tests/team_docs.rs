//! Keeps docs/team.md true to the code: every `team-…` rule has its row
//! in the rules table (with its severity) and its own `###` section, in
//! `Rule::ALL` order, and the page documents no rule that does not exist.

use squad_protocol::Rule;

const DOC: &str = include_str!("../../docs/team.md");

fn team_rules() -> Vec<Rule> {
    Rule::ALL
        .iter()
        .copied()
        .filter(|r| r.id().starts_with("team-"))
        .collect()
}

#[test]
fn every_team_rule_has_a_section_in_order() {
    let headings: Vec<&str> = DOC
        .lines()
        .filter_map(|l| l.strip_prefix("### `")?.strip_suffix('`'))
        .collect();
    let ids: Vec<&str> = team_rules().iter().map(|r| r.id()).collect();
    assert_eq!(headings, ids);
}

#[test]
fn every_team_rule_has_a_table_row_with_its_severity() {
    let rows: Vec<(&str, &str)> = DOC
        .lines()
        .filter(|l| l.starts_with("| [`team-"))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let id = cells[1].trim_start_matches("[`").split('`').next().unwrap();
            (id, cells[2])
        })
        .collect();
    let expected: Vec<(&str, &str)> = team_rules()
        .iter()
        .map(|r| (r.id(), r.severity().as_str()))
        .collect();
    assert_eq!(rows, expected);
    for r in team_rules() {
        assert_eq!(r.doc_path(), "docs/team.md");
    }
}
