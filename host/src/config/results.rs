//! `[results]`: what a tool's result may carry beyond JSON. The MIME types
//! of images, audio and resources come from an allowlist, by exact name.

use serde::Deserialize;

use crate::contract::MimeTypes;

/// `[results]` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResultsConfig {
    /// MIME types a result's images, audio and resources may have (default:
    /// [`crate::contract::content::DEFAULT_MIME_TYPES`]).
    #[serde(default)]
    pub mime_types: Option<Vec<String>>,
}

/// The allowlist of `[results]`, or the default; problems go to `problems`.
pub(super) fn mime_types(
    written: &ResultsConfig,
    problems: &mut Vec<(String, String)>,
) -> MimeTypes {
    let Some(types) = &written.mime_types else {
        return MimeTypes::default();
    };
    match MimeTypes::new(types) {
        Ok(types) => types,
        Err(found) => {
            for problem in found {
                let (index, message) = problem.split_once(": ").unwrap_or(("", &problem));
                problems.push((format!("results.mime_types{index}"), message.to_string()));
            }
            MimeTypes::default()
        }
    }
}
