//! Tool icons (contract 0.2.2's `rich-tool.icons`), checked at load: each
//! an `https:` URL or a `data:` URI of a raster image (PNG, JPEG, GIF,
//! WebP; not SVG, which clients render as a document), sent to MCP clients
//! as the tool's `icons`.

use base64::Engine as _;
use serde::Serialize;

use super::bindings::toolhost::plugin::types as wit;

/// Most icons of one tool.
pub(crate) const MAX_ICONS: usize = 8;

/// Largest `data:` URI of an icon, in bytes (every `tools/list` carries it).
pub(crate) const MAX_DATA_URI: usize = 64 << 10;

/// Longest `https:` URL of an icon, in bytes.
const MAX_URL: usize = 2048;

/// The image types an icon may have.
const ICON_TYPES: &[&str] = &["image/png", "image/jpeg", "image/gif", "image/webp"];

/// An icon of a tool, checked, in MCP's `Icon` shape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Icon {
    /// An `https:` URL or a `data:` URI.
    pub src: String,
    /// Its MIME type.
    pub mime_type: String,
    /// `WxH` or `any`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sizes: Vec<String>,
    /// `light` or `dark`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub theme: Option<&'static str>,
}

/// Checks the icons the plugin gave `tool`; every problem, each naming the
/// tool and the icon.
pub(crate) fn check(tool: &str, icons: Vec<wit::Icon>) -> Result<Vec<Icon>, Vec<String>> {
    if icons.len() > MAX_ICONS {
        return Err(vec![format!(
            "tool {tool:?} has {} icons, more than the {MAX_ICONS} a tool may have",
            icons.len()
        )]);
    }
    let mut checked = Vec::new();
    let mut problems = Vec::new();
    for (index, icon) in icons.into_iter().enumerate() {
        match check_one(icon) {
            Ok(icon) => checked.push(icon),
            Err(problem) => problems.push(format!("tool {tool:?}: icon {index}: {problem}")),
        }
    }
    if problems.is_empty() {
        Ok(checked)
    } else {
        Err(problems)
    }
}

fn check_one(icon: wit::Icon) -> Result<Icon, String> {
    let declared = icon.mime_type.map(|t| t.trim().to_ascii_lowercase());
    let mime_type = match icon.src.strip_prefix("data:") {
        Some(data) => {
            if icon.src.len() > MAX_DATA_URI {
                return Err(format!(
                    "a data: URI of {} bytes is larger than the {MAX_DATA_URI} an icon may be; \
                     serve it from an https: URL",
                    icon.src.len()
                ));
            }
            let (header, payload) = data
                .split_once(',')
                .ok_or("a data: URI needs a ',' before its data")?;
            let Some(named) = header.strip_suffix(";base64") else {
                return Err(
                    "a data: URI of an icon must be base64 (`data:image/png;base64,...`)".into(),
                );
            };
            base64::engine::general_purpose::STANDARD
                .decode(payload)
                .map_err(|e| format!("its data is not valid base64: {e}"))?;
            let named = named.to_ascii_lowercase();
            if declared.as_ref().is_some_and(|d| d != &named) {
                return Err(format!(
                    "its mime-type {declared:?} differs from the data: URI's {named:?}"
                ));
            }
            named
        }
        None => {
            let is_url = icon.src.starts_with("https://")
                && icon.src.len() <= MAX_URL
                && !icon
                    .src
                    .chars()
                    .any(|c| c.is_whitespace() || c.is_control());
            if !is_url {
                return Err(format!(
                    "src {:?} is neither an https: URL (at most {MAX_URL} bytes, no spaces) nor \
                     a data: URI",
                    super::shown::shown(&icon.src)
                ));
            }
            declared.ok_or("an https: icon needs a mime-type (`image/png`)")?
        }
    };
    if !ICON_TYPES.contains(&mime_type.as_str()) {
        return Err(format!(
            "MIME type {mime_type:?} is not an icon type; use one of {} (SVG is not accepted: \
             clients render it as a document)",
            ICON_TYPES.join(", ")
        ));
    }
    for size in &icon.sizes {
        let valid = size == "any"
            || size.split_once('x').is_some_and(|(w, h)| {
                [w, h]
                    .iter()
                    .all(|n| (1..=5).contains(&n.len()) && n.bytes().all(|b| b.is_ascii_digit()))
            });
        if !valid {
            return Err(format!(
                "size {:?} is not `WxH` (\"48x48\") or \"any\"",
                super::shown::shown(size)
            ));
        }
    }
    if icon.sizes.len() > MAX_ICONS {
        return Err(format!("lists more than {MAX_ICONS} sizes"));
    }
    Ok(Icon {
        src: icon.src,
        mime_type,
        sizes: icon.sizes,
        theme: icon.theme.map(|theme| match theme {
            wit::IconTheme::Light => "light",
            wit::IconTheme::Dark => "dark",
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn icon(src: &str, mime_type: Option<&str>) -> wit::Icon {
        wit::Icon {
            src: src.into(),
            mime_type: mime_type.map(String::from),
            sizes: vec!["48x48".into()],
            theme: Some(wit::IconTheme::Dark),
        }
    }

    #[test]
    fn raster_icons_over_https_or_data_load() {
        let icons = check(
            "t",
            vec![
                icon("https://example.com/i.png", Some("image/png")),
                icon("data:image/png;base64,iVBORw0KGgo=", None),
            ],
        )
        .unwrap();
        assert_eq!(icons[1].mime_type, "image/png");
        assert_eq!(icons[0].theme, Some("dark"));
    }

    #[test]
    fn svg_scripts_plain_http_and_bad_data_are_refused() {
        let refused = [
            icon("data:image/svg+xml;base64,PHN2Zz4=", None),
            icon("https://example.com/i.svg", Some("image/svg+xml")),
            icon("http://example.com/i.png", Some("image/png")),
            icon("javascript:alert(1)", Some("image/png")),
            icon("https://example.com/i.png", None),
            icon("data:image/png;base64,@@@", None),
            icon("data:image/png,raw", None),
            icon("data:image/png;base64,iVBO", Some("image/gif")),
            icon("https://example.com/a b.png", Some("image/png")),
        ];
        for bad in refused {
            let src = bad.src.clone();
            assert!(check("t", vec![bad]).is_err(), "{src} was accepted");
        }
        let mut odd_size = icon("https://example.com/i.png", Some("image/png"));
        odd_size.sizes = vec!["big".into()];
        assert!(check("t", vec![odd_size]).is_err());
        let many = vec![icon("https://example.com/i.png", Some("image/png")); MAX_ICONS + 1];
        assert!(check("t", many).is_err());
    }
}
