//! `squadd`: the supervisor daemon (see `squadd --help`).

fn main() -> std::process::ExitCode {
    eprintln!("squadd: the daemon is not built yet; see issue 3");
    std::process::ExitCode::from(2)
}
