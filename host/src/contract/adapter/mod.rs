//! Every released contract, loadable: which series a plugin was built
//! against, and its exports called through that series' own bindings, with
//! what they return mapped to the current types. Series 0.2 uses the
//! current bindings (minor releases only add); 0.1 has its own (`v0_1`).

mod call;
pub(crate) mod v0_1;

use wasmtime::AsContextMut;
use wasmtime::component::{Instance, InstancePre};

use super::bindings::exports::toolhost::plugin::lifecycle;
use super::bindings::toolhost::plugin::types::{ToolIcons, ToolOutput as WitToolOutput};
use super::bindings::{GuestToolError, LifecycleIndices, Manifest, RichIndices, ToolIndices};
use super::{CONTRACT_SERIES, CONTRACT_VERSION, TOOL_INTERFACE};
use call::CallExport;

/// The contract versions this host loads, by series: every released version
/// of each (a series is a major version, or a minor one below 1.0), newest
/// last. Each stays loadable.
pub const RELEASED_CONTRACTS: &[&str] = &["0.1.0", "0.2.0", "0.2.1", "0.2.2"];

/// A series of contract versions that share bindings: within one, later
/// versions only add.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Series {
    /// 0.1.x: the first contract (no `title`, `output-schema` or `progress`).
    V0_1,
    /// 0.2.x: the current one.
    V0_2,
}

impl Series {
    /// The series of contract `version` (`0.2.1`), if this host loads it.
    pub(crate) fn of(version: &str) -> Option<Self> {
        let mut parts = version.split('.');
        match (parts.next(), parts.next()) {
            (Some("0"), Some("1")) => Some(Self::V0_1),
            (Some("0"), Some("2")) => Some(Self::V0_2),
            _ => None,
        }
    }

    /// The name of its `tool` interface, as a component exports it.
    pub(crate) fn tool_interface(self) -> &'static str {
        match self {
            Self::V0_1 => "toolhost:plugin/tool@0.1.0",
            Self::V0_2 => TOOL_INTERFACE,
        }
    }
}

/// The optional lifecycle interface, without its version.
pub(crate) const LIFECYCLE_INTERFACE: &str = "toolhost:plugin/lifecycle@";

/// The optional interface of content results and icons (0.2.2), without its
/// version.
pub(crate) const RICH_INTERFACE: &str = "toolhost:plugin/rich-tool@";

/// The contract version of the `tool` interface a component exports, and
/// its series: every released version loads (see
/// [`RELEASED_CONTRACTS`]); anything else is refused with
/// the versions this host loads named.
pub(crate) fn contract_version(exports: &[String]) -> Result<(String, Series), String> {
    const PREFIX: &str = "toolhost:plugin/tool@";
    let Some(version) = exports.iter().find_map(|e| e.strip_prefix(PREFIX)) else {
        let found = if exports.is_empty() {
            "nothing".to_string()
        } else {
            exports.join(", ")
        };
        return Err(format!(
            "does not export {TOOL_INTERFACE}, so it is not a toolhost plugin \
             (it exports {found}); build it against the toolhost WIT, for example with toolhost-sdk"
        ));
    };
    match Series::of(version) {
        Some(series) => Ok((version.to_string(), series)),
        None => Err(format!(
            "was built against contract toolhost:plugin@{version}, which this host does not \
             know: it speaks toolhost:plugin@{CONTRACT_VERSION} and loads every released version \
             ({}, that is {CONTRACT_SERIES}); run a toolhost that speaks {version}, or rebuild \
             the plugin against {CONTRACT_VERSION}",
            RELEASED_CONTRACTS.join(", ")
        )),
    }
}

/// What a tool returned, before the host checks it: JSON text, or content
/// blocks (contract 0.2.2's `rich-tool`).
#[derive(Debug)]
pub struct GuestOutput(pub(crate) Raw);

#[derive(Debug)]
pub(crate) enum Raw {
    Text(String),
    Content(super::bindings::toolhost::plugin::types::ToolResult),
}

impl GuestOutput {
    /// Its size as clients receive it: JSON text as the JSON string it is
    /// sent in (escaped), binary data as base64.
    pub(crate) fn encoded_size(&self) -> usize {
        match &self.0 {
            Raw::Text(text) => super::content::json_len(text),
            Raw::Content(result) => super::content::encoded_size(result),
        }
    }

    /// Whether it is content blocks.
    pub(crate) fn is_content(&self) -> bool {
        matches!(self.0, Raw::Content(_))
    }

    fn text(text: String) -> Self {
        Self(Raw::Text(text))
    }
}

impl From<WitToolOutput> for GuestOutput {
    fn from(output: WitToolOutput) -> Self {
        Self(match output {
            WitToolOutput::Json(text) => Raw::Text(text),
            WitToolOutput::Content(result) => Raw::Content(result),
        })
    }
}

/// What `describe` said, in the current types.
pub(crate) struct Described {
    pub(crate) manifest: Manifest,
    /// The tools' icons (contract 0.2.2's `rich-tool`); empty before it.
    pub(crate) icons: Vec<ToolIcons>,
}

/// Where a plugin version's `tool` exports are, found once per version.
#[derive(Clone)]
pub(crate) enum ToolExports {
    V0_1 {
        tool: v0_1::ToolIndices,
        call: CallExport<(Result<String, v0_1::ToolError>,)>,
    },
    V0_2 {
        tool: ToolIndices,
        rich: Option<RichIndices>,
        call: CallOf0_2,
    },
}

/// The `call` a tool of series 0.2 runs through: `rich-tool`'s where
/// exported (0.2.2), else `tool`'s.
#[derive(Clone)]
pub(crate) enum CallOf0_2 {
    Text(CallExport<(Result<String, GuestToolError>,)>),
    Rich(CallExport<(Result<WitToolOutput, GuestToolError>,)>),
}

impl ToolExports {
    /// Finds the exports of a component of `series`; `rich` says whether it
    /// exports `rich-tool` (0.2.2).
    pub(crate) fn new<T>(
        pre: &InstancePre<T>,
        series: Series,
        rich: bool,
    ) -> wasmtime::Result<Self> {
        let interface = series.tool_interface();
        Ok(match series {
            Series::V0_1 => Self::V0_1 {
                tool: v0_1::ToolIndices::new(pre)?,
                call: CallExport::new(pre, interface)?,
            },
            Series::V0_2 if rich => Self::V0_2 {
                tool: ToolIndices::new(pre)?,
                rich: Some(RichIndices::new(pre)?),
                call: CallOf0_2::Rich(CallExport::new(
                    pre,
                    &format!("{RICH_INTERFACE}{CONTRACT_VERSION}"),
                )?),
            },
            Series::V0_2 => Self::V0_2 {
                tool: ToolIndices::new(pre)?,
                rich: None,
                call: CallOf0_2::Text(CallExport::new(pre, interface)?),
            },
        })
    }

    /// The exports of `instance`. They are found (and type-checked) when
    /// first used: a call needs its `call` only, whose type is checked once
    /// per version (see [`CallExport`]).
    pub(crate) fn load(&self, instance: &Instance) -> ToolGuest {
        ToolGuest {
            instance: *instance,
            exports: self.clone(),
        }
    }
}

/// An instance's `tool` exports.
pub(crate) struct ToolGuest {
    instance: Instance,
    exports: ToolExports,
}

impl ToolGuest {
    /// Calls `describe` (and `rich-tool.icons`, where exported).
    pub(crate) async fn describe<S>(&self, mut store: S) -> wasmtime::Result<Described>
    where
        S: AsContextMut,
        S::Data: Send,
    {
        let instance = &self.instance;
        match &self.exports {
            ToolExports::V0_1 { tool, .. } => Ok(Described {
                manifest: v0_1::manifest(
                    tool.load(&mut store, instance)?
                        .call_describe(store)
                        .await?,
                ),
                icons: Vec::new(),
            }),
            ToolExports::V0_2 { tool, rich, .. } => {
                let tool = tool.load(&mut store, instance)?;
                let manifest = tool.call_describe(&mut store).await?;
                let icons = match rich {
                    Some(rich) => {
                        rich.load(&mut store, instance)?
                            .call_icons(&mut store)
                            .await?
                    }
                    None => Vec::new(),
                };
                Ok(Described { manifest, icons })
            }
        }
    }

    /// Calls tool `name` with `arguments`: through `rich-tool.call` where
    /// exported, else `tool.call`.
    pub(crate) async fn call<S>(
        &self,
        store: S,
        name: &str,
        arguments: &str,
    ) -> wasmtime::Result<Result<GuestOutput, GuestToolError>>
    where
        S: AsContextMut,
        S::Data: Send,
    {
        let instance = &self.instance;
        Ok(match &self.exports {
            ToolExports::V0_1 { call, .. } => {
                let (result,) = call.call(store, instance, name, arguments).await?;
                result.map(GuestOutput::text).map_err(v0_1::tool_error)
            }
            ToolExports::V0_2 {
                call: CallOf0_2::Rich(call),
                ..
            } => call
                .call(store, instance, name, arguments)
                .await?
                .0
                .map(GuestOutput::from),
            ToolExports::V0_2 {
                call: CallOf0_2::Text(call),
                ..
            } => call
                .call(store, instance, name, arguments)
                .await?
                .0
                .map(GuestOutput::text),
        })
    }
}

/// Where a plugin version's `lifecycle` exports are.
#[derive(Clone)]
pub(crate) enum LifecycleExports {
    V0_1(v0_1::LifecycleIndices),
    V0_2(LifecycleIndices),
}

impl LifecycleExports {
    /// Finds the lifecycle exports of a component of `series`.
    pub(crate) fn new<T>(pre: &InstancePre<T>, series: Series) -> wasmtime::Result<Self> {
        Ok(match series {
            Series::V0_1 => Self::V0_1(v0_1::LifecycleIndices::new(pre)?),
            Series::V0_2 => Self::V0_2(LifecycleIndices::new(pre)?),
        })
    }

    /// The lifecycle exports of `instance`.
    pub(crate) fn load(
        &self,
        store: impl AsContextMut,
        instance: &Instance,
    ) -> wasmtime::Result<LifecycleGuest> {
        Ok(match self {
            Self::V0_1(indices) => LifecycleGuest::V0_1(indices.load(store, instance)?),
            Self::V0_2(indices) => LifecycleGuest::V0_2(indices.load(store, instance)?),
        })
    }
}

/// An instance's `lifecycle` exports.
pub(crate) enum LifecycleGuest {
    V0_1(v0_1::LifecycleGuest),
    V0_2(lifecycle::Guest),
}

impl LifecycleGuest {
    /// Calls `setup` for `session`.
    pub(crate) async fn setup<S>(
        &self,
        store: S,
        session: &str,
    ) -> wasmtime::Result<Result<(), String>>
    where
        S: AsContextMut,
        S::Data: Send,
    {
        match self {
            Self::V0_1(guest) => guest.call_setup(store, session).await,
            Self::V0_2(guest) => guest.call_setup(store, session).await,
        }
    }

    /// Calls `teardown`.
    pub(crate) async fn teardown<S>(&self, store: S) -> wasmtime::Result<()>
    where
        S: AsContextMut,
        S::Data: Send,
    {
        match self {
            Self::V0_1(guest) => guest.call_teardown(store).await,
            Self::V0_2(guest) => guest.call_teardown(store).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contract_versions() {
        let exports = |v: &str| vec![format!("toolhost:plugin/tool@{v}")];
        let loads = |v: &str| contract_version(&exports(v)).unwrap();
        assert_eq!(loads("0.1.0"), ("0.1.0".to_string(), Series::V0_1));
        assert_eq!(loads("0.2.0"), ("0.2.0".to_string(), Series::V0_2));
        assert_eq!(loads("0.2.7"), ("0.2.7".to_string(), Series::V0_2));
        for unknown in ["0.3.0", "1.0.0", "0.0.9"] {
            let refused = contract_version(&exports(unknown)).unwrap_err();
            assert!(
                refused.contains(&format!(
                    "toolhost:plugin@{unknown}, which this host does not know"
                )),
                "{refused}"
            );
            assert!(refused.contains("0.1.x and 0.2.x"), "{refused}");
        }
        assert!(
            contract_version(&[])
                .unwrap_err()
                .contains("exports nothing")
        );
    }
}
