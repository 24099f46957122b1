//! `squadctl service install|uninstall`: squadd as a systemd or launchd service.

use crate::exit;
use clap::Subcommand;
use std::path::{Path, PathBuf};

const SYSTEM_UNIT: &str = include_str!("../../../systemd/squadd.service");
const USER_UNIT: &str = include_str!("../../../systemd/squadd-user.service");
const LAUNCHD_PLIST: &str = include_str!("../../../systemd/dev.squad.squadd.plist");

/// Service commands.
#[derive(Debug, Subcommand)]
pub enum ServiceCommand {
    /// Write a unit (or plist) that runs squadd on a root, and print the
    /// commands that enable it.
    ///
    /// `--user` (default on Linux): ~/.config/systemd/user/NAME.service.
    /// `--system`: /etc/systemd/system/NAME.service, hardened, running as the
    /// invoking user (`$SUDO_USER` or `$USER`). `--launchd` (default on
    /// macOS): ~/Library/LaunchAgents/dev.squad.NAME.plist.
    Install(InstallArgs),
    /// Stop and remove an installed unit (or plist).
    Uninstall(UninstallArgs),
}

/// Which service manager, and at which level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::Args)]
#[group(multiple = false)]
pub struct Kind {
    /// A systemd user unit.
    #[arg(long)]
    pub user: bool,
    /// A systemd system unit.
    #[arg(long)]
    pub system: bool,
    /// A launchd LaunchAgent (macOS).
    #[arg(long)]
    pub launchd: bool,
}

/// Arguments of `service install`.
#[derive(Debug, clap::Args)]
pub struct InstallArgs {
    #[allow(missing_docs)]
    #[command(flatten)]
    pub kind: Kind,
    /// The squadd binary (default: the squadd next to this squadctl).
    #[arg(long, value_name = "PATH")]
    pub binary: Option<PathBuf>,
    /// Unit name (default `squadd`).
    #[arg(long, default_value = "squadd")]
    pub name: String,
    /// Print the rendered file instead of writing it.
    #[arg(long)]
    pub print: bool,
    /// Write into this directory instead of the service manager's.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// Arguments of `service uninstall`.
#[derive(Debug, clap::Args)]
pub struct UninstallArgs {
    #[allow(missing_docs)]
    #[command(flatten)]
    pub kind: Kind,
    /// Unit name (default `squadd`).
    #[arg(long, default_value = "squadd")]
    pub name: String,
    /// The directory the file was written to (default: the service manager's).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Manager {
    User,
    System,
    Launchd,
}

fn manager(kind: Kind) -> Manager {
    if kind.system {
        Manager::System
    } else if kind.launchd || (!kind.user && cfg!(target_os = "macos")) {
        Manager::Launchd
    } else {
        Manager::User
    }
}

fn home() -> Result<PathBuf, String> {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .ok_or_else(|| "HOME is not set; pass --dir".to_string())
}

fn default_dir(m: Manager) -> Result<PathBuf, String> {
    Ok(match m {
        Manager::System => PathBuf::from("/etc/systemd/system"),
        Manager::User => match std::env::var_os("XDG_CONFIG_HOME") {
            Some(x) => PathBuf::from(x).join("systemd/user"),
            None => home()?.join(".config/systemd/user"),
        },
        Manager::Launchd => home()?.join("Library/LaunchAgents"),
    })
}

fn file_name(m: Manager, name: &str) -> String {
    match m {
        Manager::Launchd => format!("dev.squad.{name}.plist"),
        _ => format!("{name}.service"),
    }
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Renders the service file for a binary and a root.
fn render(m: Manager, binary: &Path, root: &Path, name: &str) -> Result<String, String> {
    let (bin, dir) = (binary.display().to_string(), root.display().to_string());
    if m != Manager::Launchd
        && [&bin, &dir].iter().any(|p| {
            p.chars()
                .any(|c| c.is_whitespace() || "\"'\\%$;".contains(c))
        })
    {
        return Err(
            "paths with spaces, quotes, `%`, `$` or `;` need hand-written systemd escaping; use a simpler path or edit a unit from systemd/".into(),
        );
    }
    Ok(match m {
        Manager::System => {
            let user = std::env::var("SUDO_USER")
                .or_else(|_| std::env::var("USER"))
                .unwrap_or_else(|_| "squad".into());
            SYSTEM_UNIT
                .replace("/usr/local/bin/squadd", &bin)
                .replace("/srv/squad/project", &dir)
                .replace("User=squad", &format!("User={user}"))
                .replace("Group=squad\n", "")
        }
        Manager::User => USER_UNIT
            .replace("%h/.cargo/bin/squadd", &bin)
            .replace("%h/project", &dir),
        Manager::Launchd => {
            let logs = home()?.join("Library/Logs").join(format!("{name}.log"));
            LAUNCHD_PLIST
                .replace("/usr/local/bin/squadd", &xml_escape(&bin))
                .replace("/Users/me/project", &xml_escape(&dir))
                .replace(
                    "/Users/me/Library/Logs/squadd.log",
                    &xml_escape(&logs.display().to_string()),
                )
                .replace("dev.squad.squadd", &format!("dev.squad.{name}"))
        }
    })
}

fn commands(m: Manager, path: &Path, name: &str) -> String {
    match m {
        Manager::User => format!(
            "systemctl --user daemon-reload\nsystemctl --user enable --now {name}.service\njournalctl --user -u {name} -f   # logs\n"
        ),
        Manager::System => format!(
            "sudo systemctl daemon-reload\nsudo systemctl enable --now {name}.service\njournalctl -u {name} -f   # logs\n"
        ),
        Manager::Launchd => format!(
            "launchctl bootstrap gui/$(id -u) {}\nlaunchctl print gui/$(id -u)/dev.squad.{name}   # state\n",
            path.display()
        ),
    }
}

/// Runs a `service` subcommand; `install` needs the global `--root` (a
/// service has no current directory to discover its root from).
pub fn run(root_arg: Option<&Path>, cmd: ServiceCommand) -> u8 {
    match cmd {
        ServiceCommand::Install(a) => match root_arg {
            Some(root) => install(root, a),
            None => super::fail("pass --root DIR: the project root squadd will supervise"),
        },
        ServiceCommand::Uninstall(a) => uninstall(a),
    }
}

fn install(project: &Path, args: InstallArgs) -> u8 {
    if !squad_protocol::IdKind::Agent.matches(&args.name) {
        return super::fail(format!(
            "--name `{}`: use lowercase letters, digits and dashes",
            args.name
        ));
    }
    let m = manager(args.kind);
    let root = match std::fs::canonicalize(project) {
        Ok(r) if r.is_dir() => r,
        Ok(r) => return super::fail(format!("{} is not a directory", r.display())),
        Err(e) => return super::fail(format!("--root {}: {e}", project.display())),
    };
    let binary = match args.binary {
        Some(b) => b,
        None => match std::env::current_exe() {
            Ok(exe) => exe.with_file_name("squadd"),
            Err(e) => return super::fail(format!("cannot find squadd ({e}); pass --binary")),
        },
    };
    let binary = match std::fs::canonicalize(&binary) {
        Ok(b) => b,
        Err(e) => {
            return super::fail(format!(
                "squadd binary {}: {e}; pass --binary",
                binary.display()
            ));
        }
    };
    let text = match render(m, &binary, &root, &args.name) {
        Ok(t) => t,
        Err(e) => return super::fail(e),
    };
    if args.print {
        return super::print(&text);
    }
    let dir = match args.dir.map_or_else(|| default_dir(m), Ok) {
        Ok(d) => d,
        Err(e) => return super::fail(e),
    };
    let path = dir.join(file_name(m, &args.name));
    let written = std::fs::create_dir_all(&dir)
        .and_then(|()| squad_protocol::write_atomic_with(&path, text.as_bytes(), Some(0o644)));
    if let Err(e) = written {
        let hint = if m == Manager::System {
            " (system units need root: sudo)"
        } else {
            ""
        };
        return super::fail(format!("cannot write {}: {e}{hint}", path.display()));
    }
    super::print(&format!(
        "wrote {}\nsupervising {}\nto enable it, run:\n{}",
        path.display(),
        root.display(),
        commands(m, &path, &args.name)
    ))
}

fn uninstall(args: UninstallArgs) -> u8 {
    let m = manager(args.kind);
    let dir = match args.dir.clone().map_or_else(|| default_dir(m), Ok) {
        Ok(d) => d,
        Err(e) => return super::fail(e),
    };
    let path = dir.join(file_name(m, &args.name));
    if !path.exists() {
        return super::fail(format!("{} is not installed", path.display()));
    }
    // Stop the service first (only with the real service manager directory).
    let mut notes = String::new();
    if args.dir.is_none() {
        let (prog, stop): (&str, Vec<String>) = match m {
            Manager::User => (
                "systemctl",
                vec![
                    "--user".into(),
                    "disable".into(),
                    "--now".into(),
                    format!("{}.service", args.name),
                ],
            ),
            Manager::System => (
                "systemctl",
                vec![
                    "disable".into(),
                    "--now".into(),
                    format!("{}.service", args.name),
                ],
            ),
            Manager::Launchd => (
                "launchctl",
                vec![
                    "bootout".into(),
                    format!("gui/{}", unsafe_uid()),
                    path.display().to_string(),
                ],
            ),
        };
        match std::process::Command::new(prog).args(&stop).status() {
            Ok(s) if s.success() => {
                notes.push_str(&format!("stopped: {prog} {}\n", stop.join(" ")))
            }
            _ => notes.push_str(&format!(
                "could not run `{prog} {}`; stop it yourself\n",
                stop.join(" ")
            )),
        }
    }
    if let Err(e) = std::fs::remove_file(&path) {
        return super::fail(format!("cannot remove {}: {e}", path.display()));
    }
    if m != Manager::Launchd {
        let reload = if m == Manager::User {
            "systemctl --user daemon-reload"
        } else {
            "sudo systemctl daemon-reload"
        };
        notes.push_str(&format!("then run: {reload}\n"));
    }
    if super::print(&format!("removed {}\n{notes}", path.display())) != exit::OK {
        return exit::FAILURE;
    }
    exit::OK
}

fn unsafe_uid() -> u32 {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() }
}
