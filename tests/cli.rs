//! The `toolhost` command line, built inside the tests package so integration
//! tests can run it as a process.

fn main() -> std::process::ExitCode {
    toolhost::cli::main()
}
