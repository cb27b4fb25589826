//! The progress capability's imports: `impl Capability` for [`Reports`],
//! and the WIT interface `progress`, each report bounded, into a sink.

use std::future::Future;
use std::sync::Arc;

use wasmtime::component::Linker;
use wasmtime_wasi::WasiCtxBuilder;

use super::Reports;
use crate::capability::grants::Grants;
use crate::capability::sandbox::{Capability, CapabilityInfo, InRoom, Room, Sandbox};
use crate::contract::bindings::toolhost::plugin::progress::{self as wit, Host};
use crate::error::bounded;

impl Capability for Reports {
    const INFO: CapabilityInfo = CapabilityInfo {
        name: "progress",
        permissions: &[],
        section: None,
        description: "progress reports, passed to a client that asked for them",
        each: &[],
    };
    type State = ();

    fn state(_: &Grants, _: &mut WasiCtxBuilder) {}

    fn add_to_linker(linker: &mut Linker<Sandbox>) -> wasmtime::Result<()> {
        wit::add_to_linker::<_, InRoom<Self>>(linker, Sandbox::room::<Self>)
    }
}

/// Longest progress message kept, in bytes.
const MAX_MESSAGE: usize = 1024;

/// One progress report of a guest: `progress` of `total` (when known).
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    /// How much is done.
    pub progress: f64,
    /// How much there is to do, when known.
    pub total: Option<f64>,
    /// What is going on, for people.
    pub message: Option<String>,
}

/// Where the progress reports of calls go: a server passes one for a call
/// whose client asked for progress. Reports are passed on as the guest makes
/// them; the sink decides what to keep.
pub type ProgressSink = Arc<dyn Fn(Progress) + Send + Sync>;

tokio::task_local! {
    static PROGRESS_SINK: ProgressSink;
}

/// Runs `calls` (calls dispatched on this task) with their guests' progress
/// reports going to `sink`. Without one, reports go nowhere. (Not an
/// `async fn`: that would hold `calls` twice, once as its argument and once
/// inside the scope, doubling the size of every future around it.)
pub fn with_progress_sink<F: Future>(
    sink: ProgressSink,
    calls: F,
) -> impl Future<Output = F::Output> {
    PROGRESS_SINK.scope(sink, calls)
}

impl Host for Room<'_, Reports> {
    async fn report(
        &mut self,
        progress: f64,
        total: Option<f64>,
        message: Option<String>,
    ) -> wasmtime::Result<()> {
        let _ = PROGRESS_SINK.try_with(|sink| {
            sink(Progress {
                progress,
                total,
                message: message.map(|m| bounded(&m, MAX_MESSAGE).into_owned()),
            })
        });
        Ok(())
    }
}
