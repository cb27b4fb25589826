//! The `toolhost` binary; see `toolhost --help`.

fn main() -> std::process::ExitCode {
    // A terminal command's sandbox is built by this binary started again.
    toolhost::capability::terminal::confine::enter_if_requested();
    toolhost::cli::main()
}
