//! How a command in a container tells its end: after the command, its
//! wrapper shell writes to stderr [`END`], the exit code, a NUL, the state
//! the session's script left, then [`DONE`]. The host reads it out of the
//! stream, so the end is known without another request to the engine and
//! without waiting for the stream to close (which the command's background
//! children may hold open), and the state comes without another exec.
//!
//! The state cannot hold [`DONE`]: after each of its NULs comes a directory
//! (starting with `/`) or a variable name, which has no `-`. A command that
//! prints the markers itself can only end its own call early or set its
//! own session's state, which it can do anyway.

/// Starts the trailer.
pub(crate) const END: &[u8] = b"\0toolhost-end\0";

/// Ends it.
pub(crate) const DONE: &[u8] = b"\0toolhost-done\0";

/// Most bytes a trailer may take (the code and the state); a longer one is
/// not a trailer and is passed on as stderr.
const MOST: usize = super::script::MOST_STATE + 64;

/// What a stretch of stderr held.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Found {
    /// The command's stderr.
    Stderr(Vec<u8>),
    /// The trailer: the wrapper's exit code and the state bytes.
    End { code: i64, state: Vec<u8> },
}

/// Finds the trailer in stderr as it comes, across chunk boundaries.
#[derive(Default)]
pub(crate) struct Trailer {
    held: Vec<u8>,
    inside: bool,
    done: bool,
}

impl Trailer {
    /// Takes one chunk of stderr; what can be told of it so far.
    pub(crate) fn feed(&mut self, chunk: &[u8]) -> Vec<Found> {
        if self.done {
            return vec![Found::Stderr(chunk.to_vec())];
        }
        self.held.extend_from_slice(chunk);
        let mut found = Vec::new();
        if !self.inside {
            match find(&self.held, END) {
                Some(at) => {
                    if at > 0 {
                        found.push(Found::Stderr(self.held[..at].to_vec()));
                    }
                    self.held.drain(..at + END.len());
                    self.inside = true;
                }
                None => {
                    // Keep what could be the start of END.
                    let keep = (END.len() - 1).min(self.held.len());
                    let free = self.held.len() - keep;
                    if free > 0 {
                        found.push(Found::Stderr(self.held.drain(..free).collect()));
                    }
                    return found;
                }
            }
        }
        match find(&self.held, DONE) {
            Some(at) => {
                let trailer: Vec<u8> = self.held.drain(..at + DONE.len()).collect();
                let body = &trailer[..at];
                let (code, state) = match body.iter().position(|&b| b == 0) {
                    Some(nul) => (&body[..nul], &body[nul + 1..]),
                    None => (body, &[][..]),
                };
                match std::str::from_utf8(code).ok().and_then(|c| c.parse().ok()) {
                    Some(code) => found.push(Found::End {
                        code,
                        state: state.to_vec(),
                    }),
                    None => found.push(Found::Stderr(trailer)),
                }
                self.done = true;
                if !self.held.is_empty() {
                    found.push(Found::Stderr(std::mem::take(&mut self.held)));
                }
            }
            None if self.held.len() > MOST => {
                // Not a trailer after all.
                self.done = true;
                let mut bytes = END.to_vec();
                bytes.append(&mut self.held);
                found.push(Found::Stderr(bytes));
            }
            None => {}
        }
        found
    }

    /// What is held at the end of the stream, as stderr.
    pub(crate) fn rest(&mut self) -> Option<Vec<u8>> {
        let mut bytes = if self.inside && !self.done {
            END.to_vec()
        } else {
            Vec::new()
        };
        bytes.append(&mut self.held);
        (!bytes.is_empty()).then_some(bytes)
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn whole(parts: &[&[u8]]) -> (Vec<u8>, Option<(i64, Vec<u8>)>) {
        let mut trailer = Trailer::default();
        let mut stderr = Vec::new();
        let mut end = None;
        for part in parts {
            for found in trailer.feed(part) {
                match found {
                    Found::Stderr(bytes) => stderr.extend(bytes),
                    Found::End { code, state } => end = Some((code, state)),
                }
            }
        }
        if let Some(rest) = trailer.rest() {
            stderr.extend(rest);
        }
        (stderr, end)
    }

    #[test]
    fn the_trailer_is_found_split_anywhere() {
        let mut stream = b"warning: x\n".to_vec();
        stream.extend_from_slice(END);
        stream.extend_from_slice(b"3\0/w/sub\0X=1\0");
        stream.extend_from_slice(DONE);
        stream.extend_from_slice(b"late\n");
        for split in 0..stream.len() {
            for second in split..stream.len() {
                let (stderr, end) =
                    whole(&[&stream[..split], &stream[split..second], &stream[second..]]);
                assert_eq!(stderr, b"warning: x\nlate\n", "split at {split}, {second}");
                assert_eq!(end, Some((3, b"/w/sub\0X=1\0".to_vec())));
            }
        }
    }

    #[test]
    fn without_a_trailer_everything_is_stderr() {
        let (stderr, end) = whole(&[b"abc\0toolhost-e", b"nd but never done"]);
        assert_eq!(stderr, b"abc\0toolhost-end but never done");
        assert_eq!(end, None);
        // Started, never finished: given back as it came.
        let (stderr, end) = whole(&[b"a", END, b"7\0/w"]);
        assert_eq!(stderr, [&b"a"[..], END, b"7\0/w"].concat());
        assert_eq!(end, None);
        let (stderr, end) = whole(&[b"plain"]);
        assert_eq!((stderr, end), (b"plain".to_vec(), None));
    }
}
