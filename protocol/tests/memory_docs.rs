//! docs/memory.md documents every `memory-…` rule: a table row with its
//! severity and a section, in `Rule::ALL` order.

use squad_protocol::Rule;

const DOC: &str = include_str!("../../docs/memory.md");

fn memory_rules() -> Vec<Rule> {
    Rule::ALL
        .iter()
        .copied()
        .filter(|r| r.id().starts_with("memory-"))
        .collect()
}

#[test]
fn every_memory_rule_has_a_section_in_order() {
    let headings: Vec<&str> = DOC
        .lines()
        .filter_map(|l| l.strip_prefix("### `")?.strip_suffix('`'))
        .collect();
    let ids: Vec<&str> = memory_rules().iter().map(|r| r.id()).collect();
    assert_eq!(headings, ids);
}

#[test]
fn every_memory_rule_has_a_table_row_with_its_severity() {
    let rows: Vec<(String, String)> = DOC
        .lines()
        .filter(|l| l.starts_with("| [`memory-"))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let id = cells[1].trim_start_matches("[`").split('`').next().unwrap();
            (id.to_string(), cells[2].to_string())
        })
        .collect();
    let expected: Vec<(String, String)> = memory_rules()
        .iter()
        .map(|r| (r.id().to_string(), r.severity().as_str().to_string()))
        .collect();
    assert_eq!(rows, expected);
}
