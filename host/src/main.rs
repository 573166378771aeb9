//! `ork`: the Orkestra-rs command line.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
