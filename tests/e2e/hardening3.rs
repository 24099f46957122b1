//! Issue 26 (hardening III): faults found by attacking squadd and squadctl,
//! each with its regression test through the real binaries.

use crate::daemon::{Daemon, eventually};
use crate::support::*;
use std::fs;

const S: &str = "20240115T100000Z-harden3";

/// Issue 26 item 9: squadd re-parsed a file's raw text to place its
/// anchored fields (`meta.task_id`, `meta.agent`) at index time, skipping
/// the depth check the validator makes: one 100 KB deeply nested progress
/// file stopped the socket for minutes. Now it is refused unparsed there
/// too, and a critical message written right after it is delivered while
/// the status request answers.
#[test]
fn a_deeply_nested_progress_file_does_not_stall_delivery() {
    let (tmp, s) = quiet_two_agent_project(S);
    let root = tmp.path();
    let _d = Daemon::start(root);
    fs::write(
        s.join("role-comm-alice-task_alice.md"),
        format!(
            "meta:\n  task_id: task_alice\n  agent: alice\n  updated_at: 2024-01-15T11:00:00Z\nstatus: in_progress\nnotes: {}\n",
            "[".repeat(100_000)
        ),
    )
    .unwrap();
    write_alice_to_bob(
        &s,
        "msg_1",
        &notification("msg_1", "critical", "2024-01-15T10:00:00Z", "s", "m"),
    );
    let inbox = s.join("inbox/bob/new");
    eventually("the critical message delivered", || {
        fs::read_dir(&inbox)
            .ok()?
            .flatten()
            .any(|e| e.file_name().to_string_lossy().ends_with("msg_1.md"))
            .then_some(())
    });
    // The deep file is reported where it passes 64 levels, unparsed.
    let v = status_json(root);
    let text = v.to_string();
    assert!(
        text.contains("nesting deeper than 64 levels (not parsed)"),
        "{text}"
    );
}

/// The names in `dir` (empty when it does not exist).
fn names(dir: &std::path::Path) -> Vec<String> {
    fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Issue 26 item 11: a second message reusing a `message_id` was never
/// delivered, silently: no event, and its sender was never told. It is
/// still not delivered (its recipient would take it for the first), but
/// refused visibly: a `message-refused` audit event naming the clash, and
/// a notice to its sender naming the file that keeps the id.
#[test]
fn a_reused_message_id_is_refused_with_an_event_and_a_notice_to_its_sender() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let s = two_agent_session(root, S);
    let _d = Daemon::start(root);
    write_alice_to_bob(
        &s,
        "msg_1",
        &notification("msg_1", "high", "2024-01-15T10:00:00Z", "first", "m"),
    );
    eventually("the first delivered to bob", || {
        names(&s.join("inbox/bob/new"))
            .iter()
            .any(|n| n.ends_with("-msg_1.md"))
            .then_some(())
    });
    // bob answers with the same id: his file sorts after alice's.
    fs::write(
        s.join("role-comm-bob-to-alice-msg_1.md"),
        "meta:\n  message_id: msg_1\n  from_agent: bob\n  to_agent: alice\n  created_at: 2024-01-15T10:05:00Z\n  priority: high\ntype: notification\nsubject: second\nmessage: m\n",
    )
    .unwrap();
    eventually("the refusal audited", || {
        (audited_message(root, "message-refused", "msg_1") == 1).then_some(())
    });
    let audit = audit_log(root).unwrap_or_default();
    let line = audit
        .lines()
        .find(|l| l.contains("\"kind\":\"message-refused\""))
        .unwrap();
    assert!(
        line.contains("role-comm-bob-to-alice-msg_1.md")
            && line.contains("role-comm-alice-to-bob-msg_1.md"),
        "{line}"
    );
    // bob is told, naming the clash.
    let notice = eventually("a notice to bob about the clash", || {
        names(&s.join("inbox/bob/new"))
            .into_iter()
            .filter(|n| n.contains("msg_squadd_"))
            .map(|n| fs::read_to_string(s.join("inbox/bob/new").join(n)).unwrap_or_default())
            .find(|t| t.contains("role-comm-bob-to-alice-msg_1.md") && t.contains("msg_1"))
    });
    assert!(
        notice.contains("role-comm-alice-to-bob-msg_1.md"),
        "{notice}"
    );
    // Not delivered: alice's inbox holds no msg_1.
    assert!(
        !names(&s.join("inbox/alice/new"))
            .iter()
            .any(|n| n.ends_with("-msg_1.md")),
        "{:?}",
        names(&s.join("inbox/alice/new"))
    );
}

fn skill_text(name: &str) -> String {
    format!("---\nname: {name}\ndescription: Use for {name}.\n---\n# {name}\n\nInstructions.\n")
}

/// `squadctl status --json`'s skills of the first root.
fn skills_of(root: &std::path::Path) -> serde_json::Value {
    status_json(root)["roots"][0]["skills"].clone()
}

/// Issue 26 item 15: squadd took one inotify watch per skill folder
/// (50,000 skills: 50,005 watches) and re-read every skill on each skill
/// edit. Now the places are watched and at most 256 skill folders (plus
/// any folder still waiting for its SKILL.md), and an edit re-reads only
/// the SKILL.md files that changed (counted in the debug log).
#[test]
fn many_skills_take_a_bounded_number_of_watches_and_an_edit_rereads_one_skill() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    fs::create_dir_all(root.join(".squad/sessions")).unwrap();
    let n = 600;
    for i in 0..n {
        let name = format!("s{i:03}");
        write(
            root,
            &format!(".squad/skills/{name}/SKILL.md"),
            &skill_text(&name),
        );
    }
    let d = Daemon::start(root);
    let out = ctl_run(root, &["health", "--json"]);
    let h: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let watches = h["watches"].as_u64().unwrap();
    assert!(
        watches < 300,
        "{watches} watches for {n} skills: one per skill folder"
    );
    assert_eq!(skills_of(root)["loaded"], n, "{}", skills_of(root));
    // An edit in place of a watched skill is seen.
    write(root, ".squad/skills/s000/SKILL.md", "");
    eventually("the broken skill in status", || {
        let s = skills_of(root);
        (s["errors"] == 1 && s["loaded"] == n - 1).then_some(())
    });
    // A new skill past the budget: its folder first, its SKILL.md after
    // squadd looked at the empty folder (the folder is watched until then).
    fs::create_dir(root.join(".squad/skills/s900")).unwrap();
    eventually("the empty folder reported", || {
        let s = skills_of(root);
        s["problems"].to_string().contains("s900").then_some(())
    });
    write(root, ".squad/skills/s900/SKILL.md", &skill_text("s900"));
    eventually("the new skill loaded", || {
        (skills_of(root)["loaded"] == n).then_some(())
    });
    let (code, log) = d.terminate();
    assert_eq!(code, 0, "{log}");
    let rereads: Vec<usize> = log
        .lines()
        .filter(|l| l.contains("skills checked"))
        .filter_map(|l| {
            let v = l.split("reread=").nth(1)?;
            v.split(' ').next()?.parse().ok()
        })
        .collect();
    assert_eq!(rereads.first(), Some(&n), "{rereads:?}");
    assert!(
        rereads.len() >= 3 && rereads[1..].iter().all(|&r| r <= 1),
        "each edit re-reads the skill it touched only: {rereads:?}"
    );
}

/// Issue 26 item 11, the other order: a later message reusing an id whose
/// file name sorts before the delivered one's (so the first by name is the
/// new one) was dropped without a word (same inbox name: "already
/// delivered"). The delivered file keeps the id; the new one is refused
/// visibly; a restart does not refuse the delivered one.
#[test]
fn a_reused_message_id_sorting_first_is_refused_and_the_delivered_one_keeps_it() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let s = two_agent_session(root, S);
    let d = Daemon::start(root);
    write_alice_to_bob(
        &s,
        "msg_1",
        &notification("msg_1", "high", "2024-01-15T10:00:00Z", "first", "m"),
    );
    let bob_msg_1 = || {
        names(&s.join("inbox/bob/new"))
            .into_iter()
            .filter(|n| n.ends_with("-msg_1.md"))
            .collect::<Vec<_>>()
    };
    eventually("the first delivered to bob", || {
        (bob_msg_1().len() == 1).then_some(())
    });
    // aaron's file sorts before alice's; same priority and time: the same
    // inbox name.
    fs::write(
        s.join("role-comm-aaron-to-bob-msg_1.md"),
        notification("msg_1", "high", "2024-01-15T10:00:00Z", "second", "m")
            .replace("from_agent: alice", "from_agent: aaron"),
    )
    .unwrap();
    let refused = |file: &str| {
        audit_log(root)
            .unwrap_or_default()
            .lines()
            .filter(|l| {
                l.contains("\"kind\":\"message-refused\"")
                    && l.contains(&format!("\"file\":\"{file}\""))
            })
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let line = eventually("aaron's message refused", || {
        refused("role-comm-aaron-to-bob-msg_1.md")
            .into_iter()
            .next()
    });
    assert!(
        line.contains("\"kept_by\":\"role-comm-alice-to-bob-msg_1.md\""),
        "{line}"
    );
    eventually("a notice to aaron about the clash", || {
        names(&s.join("inbox/aaron/new"))
            .into_iter()
            .map(|n| fs::read_to_string(s.join("inbox/aaron/new").join(n)).unwrap_or_default())
            .find(|t| t.contains("role-comm-aaron-to-bob-msg_1.md"))
    });
    // bob holds alice's message, once.
    let held = bob_msg_1();
    assert_eq!(held.len(), 1, "{held:?}");
    let text = fs::read_to_string(s.join("inbox/bob/new").join(&held[0])).unwrap();
    assert!(text.contains("subject: first"), "{text}");
    // A restart routes every file again: aaron's is refused again, alice's
    // (delivered before the clash) is not.
    let (code, log) = d.terminate();
    assert_eq!(code, 0, "{log}");
    let _d = Daemon::start(root);
    eventually("aaron's refused again after the restart", || {
        (refused("role-comm-aaron-to-bob-msg_1.md").len() == 2).then_some(())
    });
    assert!(
        refused("role-comm-alice-to-bob-msg_1.md").is_empty(),
        "{:?}",
        refused("role-comm-alice-to-bob-msg_1.md")
    );
    assert_eq!(bob_msg_1().len(), 1);
}
