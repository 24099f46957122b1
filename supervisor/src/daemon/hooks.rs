//! Notification hooks: the per-agent argv commands of the message policy,
//! run on their own tasks (with timeout and retries) so a slow or failing
//! hook never delays anything else. Outcomes come back on a channel.

use squad_policies::messages::NotifyCommand;
use squad_protocol::model::Priority;
use std::path::Path;
use std::time::Duration;
use tokio::sync::mpsc;

/// The outcome of a notify command, reported back to the supervisor task.
pub struct HookOutcome {
    /// Root index.
    pub root: usize,
    /// Session directory name.
    pub session: String,
    /// Recipient.
    pub to: String,
    /// Message id.
    pub message_id: String,
    /// Why it failed after all retries, if it did.
    pub error: Option<String>,
}

/// What a hook is told about the message.
pub struct Notice<'a> {
    /// Root index.
    pub root: usize,
    /// Session directory name.
    pub session: &'a str,
    /// Sender (`squadd` for escalations and routed reports).
    pub from: &'a str,
    /// Recipient.
    pub to: &'a str,
    /// Message id.
    pub message_id: &'a str,
    /// Priority.
    pub priority: Priority,
    /// The delivered inbox file.
    pub path: &'a Path,
}

/// Starts hooks and collects their outcomes.
pub struct Hooks {
    tx: mpsc::UnboundedSender<HookOutcome>,
}

impl Hooks {
    /// The hook runner and the channel of outcomes.
    pub fn new() -> (Hooks, mpsc::UnboundedReceiver<HookOutcome>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Hooks { tx }, rx)
    }

    /// Runs the recipient's notify command, if the policy names one (policy
    /// only: never a command an agent wrote).
    pub fn notify(&self, policy: &squad_policies::messages::MessagePolicy, n: Notice<'_>) {
        let Some(cmd) = policy
            .notify
            .get(n.to)
            .or_else(|| policy.notify.get("*"))
            .cloned()
        else {
            return;
        };
        let env = vec![
            ("SQUAD_MESSAGE_PATH", n.path.display().to_string()),
            ("SQUAD_PRIORITY", n.priority.to_string()),
            ("SQUAD_FROM", n.from.to_string()),
            ("SQUAD_TO", n.to.to_string()),
            ("SQUAD_SESSION", n.session.to_string()),
        ];
        let outcome = HookOutcome {
            root: n.root,
            session: n.session.to_string(),
            to: n.to.to_string(),
            message_id: n.message_id.to_string(),
            error: None,
        };
        let tx = self.tx.clone();
        let path = n.path.display().to_string();
        tokio::spawn(async move {
            let error = run_hook(&cmd, &path, &env).await.err();
            let _ = tx.send(HookOutcome { error, ..outcome });
        });
    }
}

/// Runs a notify command with its timeout and retries (1 s, 2 s, 4 s… apart).
async fn run_hook(cmd: &NotifyCommand, path: &str, env: &[(&str, String)]) -> Result<(), String> {
    let argv: Vec<String> = cmd
        .command
        .iter()
        .map(|a| a.replace("{path}", path))
        .collect();
    let Some(program) = argv.first() else {
        return Err("empty notify command".into());
    };
    let mut last = String::new();
    for attempt in 0..=cmd.retries {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_secs(1 << (attempt - 1).min(6))).await;
        }
        let mut child = match tokio::process::Command::new(program)
            .args(&argv[1..])
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
        {
            Ok(c) => c,
            Err(e) => {
                last = format!("cannot run {program}: {e}");
                continue;
            }
        };
        match tokio::time::timeout(cmd.timeout, child.wait()).await {
            Ok(Ok(s)) if s.success() => return Ok(()),
            Ok(Ok(s)) => last = format!("{program} exited with {s}"),
            Ok(Err(e)) => last = format!("{program}: {e}"),
            Err(_) => {
                let _ = child.kill().await;
                last = format!("{program} timed out after {:?}", cmd.timeout);
            }
        }
    }
    Err(format!("{last} (after {} attempt(s))", cmd.retries + 1))
}
