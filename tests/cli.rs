//! The `toolhost` command line, built inside the tests package so integration
//! tests can run it as a process.

fn main() -> std::process::ExitCode {
    // A terminal command's sandbox is built by this binary started again.
    toolhost::capability::terminal::confine::enter_if_requested();
    toolhost::cli::main()
}
