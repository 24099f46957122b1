//! One SKILL.md checked against the Agent Skills standard: the front
//! matter split off and parsed, then each field (`name`, `description`,
//! `license`, `compatibility`, `metadata`, `allowed-tools`) in file order.

use super::*;

/// Checks the text of a SKILL.md at `path` (its folder is the name the skill
/// must have). `strict` makes every diagnostic an error.
pub fn check_text(path: &Path, text: &str, strict: bool) -> SkillReport {
    let mut report = SkillReport {
        path: path.to_path_buf(),
        skill: None,
        diagnostics: Vec::new(),
    };
    let fm = match frontmatter::split(text) {
        Ok(fm) => fm,
        Err(e) => return front_matter_failed(path, text, e, strict),
    };
    let mut c = Checker {
        path,
        yaml: fm.yaml,
        first_line: fm.first_line,
        strict,
        diagnostics: Vec::new(),
    };
    let value: Value = match crate::depth::from_str(fm.yaml) {
        Ok(v) => v,
        // Refused unparsed: the parser's cost is quadratic in the depth.
        Err(crate::depth::YamlError::TooDeep { line, column }) => {
            c.push(
                Rule::SkillYamlSyntax,
                Some(Location {
                    line: u32::try_from(line)
                        .unwrap_or(u32::MAX)
                        .saturating_add(fm.first_line - 1),
                    column: u32::try_from(column).unwrap_or(u32::MAX),
                }),
                format!(
                    "the front matter nests deeper than {} levels (not parsed)",
                    crate::depth::MAX_DEPTH
                ),
                "flatten the front matter; its fields nest a level or two",
            );
            report.diagnostics = c.diagnostics;
            return report;
        }
        Err(crate::depth::YamlError::Syntax(e)) => {
            let loc = e.location().map(|l| Location {
                line: u32::try_from(l.line())
                    .unwrap_or(u32::MAX)
                    .saturating_add(fm.first_line - 1),
                column: u32::try_from(l.column()).unwrap_or(u32::MAX),
            });
            let message = e.to_string();
            let message = message.split(" at line ").next().unwrap_or(&message);
            c.push(
                Rule::SkillYamlSyntax,
                loc,
                format!("the front matter is not valid YAML: {message}"),
                "quote values holding `: ` or starting with a special character (`description: \"Use when: …\"`)",
            );
            report.diagnostics = c.diagnostics;
            return report;
        }
    };
    let Value::Mapping(front) = value else {
        c.push(
            Rule::SkillNotAMapping,
            Some(Location {
                line: fm.first_line,
                column: 1,
            }),
            format!(
                "the front matter is {}, not a mapping of fields",
                describe(&value)
            ),
            "write one `field: value` per line",
        );
        report.diagnostics = c.diagnostics;
        return report;
    };

    // Fields in file order: unknown ones first so the report reads top-down
    // per field (diagnostics are sorted by position at the end).
    for (k, _) in &front {
        let name = key_text(k);
        // Squad's own fields are known (its CLI ships skills with them).
        if !STANDARD_FIELDS.contains(&name.as_str()) && !SQUAD_FIELDS.contains(&name.as_str()) {
            c.field(
                &name,
                Rule::SkillUnknownField,
                format!("`{name}` is not a field of the Agent Skills standard"),
                &format!("move it under `metadata:` as a string (`metadata: {{{name}: \"…\"}}`) or remove it; strict clients refuse the skill"),
            );
        }
    }

    let folder = folder_name(path);
    let name = check_name(&mut c, &front, folder.as_deref());

    let description = check_description(&mut c, &front);

    let string_field = |c: &mut Checker, field: &str| -> Option<String> {
        match front.get(key(field)) {
            None => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(other) => {
                c.value(
                    &[PathSeg::Key(field.into())],
                    Rule::SkillFieldType,
                    format!("`{field}` is {}, not a string", describe(other)),
                    "write it as one string (quote it)",
                );
                None
            }
        }
    };
    let license = string_field(&mut c, "license");
    let compatibility = string_field(&mut c, "compatibility");
    if let Some(comp) = &compatibility {
        let len = comp.chars().count();
        if len > MAX_COMPATIBILITY_CHARS {
            c.value(
                &[PathSeg::Key("compatibility".into())],
                Rule::SkillCompatibilityTooLong,
                format!("`compatibility` is {len} characters (at most {MAX_COMPATIBILITY_CHARS})"),
                "state only the environment the skill needs (product, packages, network)",
            );
        }
    }

    let metadata = check_metadata(&mut c, &front);

    let allowed_tools = check_allowed_tools(&mut c, &front);

    let mcp = mcp_servers(&front);
    c.diagnostics.sort_by_key(|d| d.location);
    report.diagnostics = c.diagnostics;
    let name = name.or(folder);
    if let (Some(name), Some(description)) = (name, description) {
        report.skill = Some(Skill {
            name,
            description,
            path: path.to_path_buf(),
            license,
            compatibility,
            allowed_tools,
            metadata,
            mcp_servers: mcp,
        });
    }
    report
}

/// The report on a SKILL.md whose front matter could not be split off:
/// none, or never closed. Squad's lenient loading still takes a file with
/// no front matter and a first paragraph.
fn front_matter_failed(path: &Path, text: &str, e: FrontMatterError, strict: bool) -> SkillReport {
    let mut report = SkillReport {
        path: path.to_path_buf(),
        skill: None,
        diagnostics: Vec::new(),
    };
    let (rule, message, hint) = match e {
        FrontMatterError::Missing if text.trim().is_empty() => (
            Rule::SkillNoFrontMatter,
            "the file is empty".to_string(),
            "start the file with `---`, `name: …`, `description: …`, `---`",
        ),
        FrontMatterError::Missing => {
            // Squad loads such a skill under its folder's name; so
            // does lenient loading, described by its first paragraph.
            if let (Some(folder), Some(description)) =
                (folder_name(path), description_from_body(text))
            {
                let mut d = Diagnostic::new(
                    path,
                    Rule::SkillNoFrontMatter,
                    format!("the file has no `---` front matter; loaded as Squad loads it: named `{folder}` after its folder, described by its first paragraph"),
                    format!("add front matter (`---`, `name: {folder}`, `description: …`, `---`): other Agent Skills clients skip this skill"),
                )
                .at(Some(Location { line: 1, column: 1 }));
                d.severity = if strict {
                    Severity::Error
                } else {
                    Severity::Warning
                };
                report.diagnostics.push(d);
                report
                    .diagnostics
                    .extend(invisible_text(path, &description, None, strict));
                if !strict {
                    report.skill = Some(Skill {
                        name: folder,
                        description,
                        path: path.to_path_buf(),
                        license: None,
                        compatibility: None,
                        allowed_tools: None,
                        metadata: BTreeMap::new(),
                        mcp_servers: Vec::new(),
                    });
                }
                return report;
            }
            (
                Rule::SkillNoFrontMatter,
                "the file does not start with a `---` front matter block and has no text to describe it; agents never see this skill".to_string(),
                "add front matter: `---`, `name: <folder name>`, `description: <what it does and when to use it>`, `---`",
            )
        }
        FrontMatterError::Unclosed => (
            Rule::SkillUnclosedFrontMatter,
            "the front matter opened on line 1 has no closing `---` line".to_string(),
            "end the front matter with a line holding only `---`",
        ),
    };
    let mut d =
        Diagnostic::new(path, rule, message, hint).at(Some(Location { line: 1, column: 1 }));
    if strict {
        d.severity = Severity::Error;
    }
    report.diagnostics.push(d);
    report
}

/// The `name` field checked (format, the folder's name).
fn check_name(c: &mut Checker, front: &Mapping, folder: Option<&str>) -> Option<String> {
    let name = match front.get(key("name")) {
        Some(Value::String(s)) if !s.trim().is_empty() => Some(s.trim().to_string()),
        Some(other) => {
            c.field(
                "name",
                Rule::SkillMissingName,
                format!("`name` is {}, not a non-empty string", describe(other)),
                "set `name` to the folder name",
            );
            None
        }
        None => {
            c.push(
                Rule::SkillMissingName,
                Some(Location {
                    line: c.first_line,
                    column: 1,
                }),
                "`name` is missing".into(),
                &format!(
                    "add `name: {}`",
                    folder
                        .map(suggest_name)
                        .unwrap_or_else(|| "<folder name>".into())
                ),
            );
            None
        }
    };
    if let Some(n) = &name {
        if let Some(problem) = name_problem(n) {
            let hint = format!(
                "use lowercase letters, digits and single hyphens, e.g. `{}` (and name the folder the same)",
                suggest_name(n)
            );
            c.value(
                &[PathSeg::Key("name".into())],
                Rule::SkillNameFormat,
                format!("`name` `{n}` {problem}"),
                &hint,
            );
        }
        if let Some(f) = folder
            && f != n
        {
            c.value(
                &[PathSeg::Key("name".into())],
                Rule::SkillNameMismatch,
                format!("`name` is `{n}` but the folder is `{f}`"),
                "rename the folder or the skill so they are equal; clients look skills up by folder",
            );
        }
    }
    name
}

/// The `description` field checked (length, invisible text, angle
/// brackets).
fn check_description(c: &mut Checker, front: &Mapping) -> Option<String> {
    let description = match front.get(key("description")) {
        Some(Value::String(s)) if !s.trim().is_empty() => Some(s.trim().to_string()),
        Some(other) => {
            let what = match other {
                Value::String(_) => "empty".to_string(),
                v => format!("{}, not a string", describe(v)),
            };
            c.field(
                "description",
                Rule::SkillMissingDescription,
                format!("`description` is {what}; the skill is skipped"),
                "describe what the skill does and when to use it, in one string",
            );
            None
        }
        None => {
            c.push(
                Rule::SkillMissingDescription,
                Some(Location {
                    line: c.first_line,
                    column: 1,
                }),
                "`description` is missing; the skill is skipped".into(),
                "add `description: <what the skill does and when to use it>`",
            );
            None
        }
    };
    if let Some(d) = &description {
        let len = d.chars().count();
        if len > MAX_DESCRIPTION_CHARS {
            c.value(
                &[PathSeg::Key("description".into())],
                Rule::SkillDescriptionTooLong,
                format!("`description` is {len} characters (at most {MAX_DESCRIPTION_CHARS})"),
                "shorten it to what the skill does and when to use it; move detail into the body",
            );
        }
        c.diagnostics.extend(invisible_text(
            c.path,
            d,
            c.at(&[PathSeg::Key("description".into())], Target::Value),
            c.strict,
        ));
        if d.contains(['<', '>']) {
            c.value(
                &[PathSeg::Key("description".into())],
                Rule::SkillDescriptionAngle,
                "`description` contains `<` or `>`".into(),
                "write it without angle brackets: it is placed inside an XML block of the prompt",
            );
        }
    }
    description
}

/// The `metadata` field checked: strings to strings.
fn check_metadata(c: &mut Checker, front: &Mapping) -> BTreeMap<String, String> {
    let mut metadata = BTreeMap::new();
    match front.get(key("metadata")) {
        None | Some(Value::Null) => {}
        Some(Value::Mapping(m)) => {
            for (k, v) in m {
                let kt = key_text(k);
                match (k, v) {
                    (Value::String(_), Value::String(s)) => {
                        metadata.insert(kt, s.clone());
                    }
                    _ => {
                        let what = if matches!(k, Value::String(_)) {
                            format!("`metadata.{kt}` is {}, not a string", describe(v))
                        } else {
                            format!("the `metadata` key `{kt}` is not a string")
                        };
                        c.value(
                            &[PathSeg::Key("metadata".into()), PathSeg::Key(kt.clone())],
                            Rule::SkillMetadataValue,
                            what,
                            "metadata maps strings to strings: quote the value (`version: \"1.0\"`) or write a list as one string",
                        );
                    }
                }
            }
        }
        Some(other) => {
            c.value(
                &[PathSeg::Key("metadata".into())],
                Rule::SkillFieldType,
                format!("`metadata` is {}, not a mapping", describe(other)),
                "write `metadata:` followed by indented `key: \"value\"` lines",
            );
        }
    }
    metadata
}

/// The `allowed-tools` field checked: one space-separated string.
fn check_allowed_tools(c: &mut Checker, front: &Mapping) -> Option<String> {
    match front.get(key("allowed-tools")) {
        None => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Sequence(items)) if items.iter().all(|i| matches!(i, Value::String(_))) => {
            c.value(
                &[PathSeg::Key("allowed-tools".into())],
                Rule::SkillAllowedTools,
                "`allowed-tools` is a list, not a space-separated string".into(),
                "write the tools as one string: `allowed-tools: Read Bash(git:*)`",
            );
            Some(
                items
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(" "),
            )
        }
        Some(other) => {
            c.value(
                &[PathSeg::Key("allowed-tools".into())],
                Rule::SkillAllowedTools,
                format!(
                    "`allowed-tools` is {}, not a space-separated string",
                    describe(other)
                ),
                "write the tools as one string: `allowed-tools: Read Bash(git:*)`",
            );
            None
        }
    }
}
