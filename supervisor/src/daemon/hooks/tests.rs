//! Tests of [`super`].

use super::*;

#[test]
fn a_failed_hook_says_why_and_after_how_many_attempts() {
    let e = HookError::Failed {
        last: "notify-send exited with exit status: 1".into(),
        attempts: 3,
    };
    assert_eq!(
        e.to_string(),
        "notify-send exited with exit status: 1 (after 3 attempt(s))"
    );
    assert_eq!(HookError::Empty.to_string(), "empty notify command");
}

#[test]
fn the_failure_window_counts_the_last_sixty_minutes() {
    let mut w = FailureWindow::default();
    assert_eq!(w.last_hour(0), 0);
    w.add(0);
    w.add(0);
    w.add(30);
    assert_eq!(w.last_hour(0), 2);
    assert_eq!(w.last_hour(59), 3);
    assert_eq!(w.last_hour(60), 1, "minute 0 is an hour old");
    assert_eq!(w.last_hour(90), 0);
    // Minute 60 reuses minute 0's bucket: the old count is gone.
    w.add(60);
    assert_eq!(w.last_hour(60), 2);
    assert_eq!(w.last_hour(200), 0);
}

fn pending(id: &str, to: &str) -> String {
    format!(
        r#"{{"op":"pending","id":"{id}","session":"S","from":"alice","to":"{to}","message_id":"m_{id}","priority":"high","path":"/x/{id}.md"}}"#
    )
}

#[test]
fn resume_queues_what_has_no_done_line_and_rewrites_the_journal() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join(".squad/run");
    std::fs::create_dir_all(&run).unwrap();
    let journal = format!(
        "{}\n{}\n{}\n{}\n{}\n{{\"op\":\"pend",
        pending("a", "bob"),
        pending("b", "bob"),
        r#"{"op":"done","id":"a"}"#,
        pending("c", "carol"),
        pending("d", "bob"),
    );
    std::fs::write(run.join(JOURNAL_FILE), journal).unwrap();
    let policy = squad_policies::Policy::parse(Some(
        "messages:\n  notify:\n    bob:\n      command: [\"true\"]\n",
    ))
    .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (mut hooks, mut outcomes) = Hooks::new();
        // b and d (bob has a command; carol no longer has one; a is done;
        // the torn last line is skipped).
        let n = hooks.resume(RootId::nth(0), tmp.path(), &policy.messages, &policy.hooks);
        assert_eq!(n, 2);
        let text = std::fs::read_to_string(run.join(JOURNAL_FILE)).unwrap();
        assert_eq!(
            text,
            format!("{}\n{}\n", pending("b", "bob"), pending("d", "bob"))
        );
        let mut ids = vec![
            outcomes.recv().await.unwrap().message_id,
            outcomes.recv().await.unwrap().message_id,
        ];
        ids.sort();
        assert_eq!(ids, ["m_b", "m_d"]);
    });
    let text = std::fs::read_to_string(run.join(JOURNAL_FILE)).unwrap();
    assert_eq!(text.matches(r#""op":"done""#).count(), 2, "{text}");
}
