//! `squadctl`: see `squadctl --help`.

fn main() -> std::process::ExitCode {
    squad_supervisor::ctl::main()
}
