//! The cancellation of a task's call: a call run under [`cancellable`] is
//! ended by the dispatcher when the task is cancelled (dropping it kills its
//! command's process group or the guest), and audited as `cancelled`.

use std::future::Future;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::error::{CallError, ErrorKind};

tokio::task_local! {
    static TASK: (CancellationToken, Arc<str>);
}

/// Runs `call` as the call of task `id`, ended when `token` is cancelled.
pub(crate) fn cancellable<F: Future>(
    token: CancellationToken,
    id: Arc<str>,
    call: F,
) -> impl Future<Output = F::Output> {
    TASK.scope((token, id), call)
}

/// The error of the call running now once its task is cancelled; pending
/// forever for a call that is not a task's.
pub(crate) async fn cancelled_call() -> CallError {
    match TASK.try_with(|(token, id)| (token.clone(), id.clone())) {
        Ok((token, id)) => {
            token.cancelled().await;
            CallError::new(
                ErrorKind::Cancelled,
                format!("task {id} was cancelled by the client; the call was ended"),
            )
        }
        Err(_) => std::future::pending().await,
    }
}
