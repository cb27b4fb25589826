//! TOML parsing whose one error names the key and the line.

/// Parses TOML into `T`; the error is `(key path, message with the line)`.
pub(crate) fn parse_toml<T: serde::de::DeserializeOwned>(
    text: &str,
) -> Result<T, (String, String)> {
    let deserializer =
        toml::de::Deserializer::parse(text).map_err(|e| (String::new(), toml_message(text, &e)))?;
    serde_path_to_error::deserialize(deserializer).map_err(|e| {
        let key = e.path().to_string();
        let key = if key == "." { String::new() } else { key };
        (key, toml_message(text, e.inner()))
    })
}

fn toml_message(text: &str, error: &toml::de::Error) -> String {
    let message = error.message().trim().replace('\n', " ");
    match error.span() {
        Some(span) => {
            let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
            format!("{message} (line {line})")
        }
        None => message,
    }
}
