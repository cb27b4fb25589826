//! Unit tests of `serve/mcp/stdio`.

use std::io::Write as _;
use std::os::fd::AsFd as _;
use std::time::{Duration, Instant};

use super::poll_readable;

#[test]
fn polling_ends_as_soon_as_a_message_is_waiting_or_the_writer_is_gone() {
    let (reader, mut writer) = std::io::pipe().unwrap();
    writer.write_all(b"{}\n").unwrap();
    let started = Instant::now();
    poll_readable(reader.as_fd(), Duration::from_secs(30));
    assert!(started.elapsed() < Duration::from_secs(10));

    let (reader, writer) = std::io::pipe().unwrap();
    drop(writer);
    let started = Instant::now();
    poll_readable(reader.as_fd(), Duration::from_secs(30));
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[test]
fn polling_an_idle_pipe_stops_at_the_budget() {
    let (reader, _writer) = std::io::pipe().unwrap();
    let started = Instant::now();
    poll_readable(reader.as_fd(), Duration::from_millis(20));
    let elapsed = started.elapsed();
    assert!(elapsed >= Duration::from_millis(20), "{elapsed:?}");
    assert!(elapsed < Duration::from_secs(10), "{elapsed:?}");
}
