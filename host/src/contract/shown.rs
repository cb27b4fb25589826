//! Text from a plugin, cut short for an error message: a long name, URL or
//! size string names the problem without flooding the log or the client.

/// `text` cut to 80 bytes for an error message.
pub(crate) fn shown(text: &str) -> String {
    if text.len() > 80 {
        format!("{}…", &text[..text.floor_char_boundary(80)])
    } else {
        text.to_string()
    }
}
