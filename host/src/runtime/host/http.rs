use crate::runtime::bindings::toolhost::plugin::http::{Host, HttpError, Request, Response};
use crate::runtime::sandbox::Sandbox;

impl Host for Sandbox {
    async fn fetch(&mut self, request: Request) -> wasmtime::Result<Result<Response, HttpError>> {
        Ok(Err(HttpError::Denied(format!(
            "plugin {:?} may not fetch {}: network access is not granted",
            self.identity.plugin, request.url
        ))))
    }
}
