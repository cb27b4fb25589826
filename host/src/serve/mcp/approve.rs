//! Approvals asked of an MCP client's user through elicitation, and the
//! refusal for clients that cannot be asked.

use std::time::Duration;

use rmcp::Peer;
use rmcp::service::RoleServer;
use serde::Deserialize;

use crate::approval::{Approval, ApprovalRequest, Approver, DenyApprover};
use crate::hooks::BoxFuture;

/// The answer a client gives to an approval question.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct ApprovalAnswer {
    /// once: allow this call; session: allow for this session; always: allow
    /// from now on; deny: refuse.
    decision: Decision,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(inline)]
enum Decision {
    Once,
    Session,
    Always,
    Deny,
}

rmcp::elicit_safe!(ApprovalAnswer);

/// Asks the MCP client's user through elicitation.
pub(super) struct ElicitApprover {
    pub(super) peer: Peer<RoleServer>,
    /// How long the user has to answer (`approvals.timeout`).
    pub(super) timeout: Duration,
}

impl Approver for ElicitApprover {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, Approval> {
        Box::pin(async move {
            let message = format!("Approval needed: {request}");
            match self
                .peer
                .elicit_with_timeout::<ApprovalAnswer>(message, Some(self.timeout))
                .await
            {
                Ok(Some(answer)) => match answer.decision {
                    Decision::Once => Approval::Once,
                    Decision::Session => Approval::Session,
                    Decision::Always => Approval::Always,
                    Decision::Deny => Approval::Deny,
                },
                Ok(None) => Approval::Deny,
                Err(error) => {
                    tracing::warn!(%error, "approval through elicitation failed");
                    Approval::Deny
                }
            }
        })
    }

    fn how_to_allow(&self) -> &str {
        "the user declined or did not answer"
    }
}

/// For clients that cannot be asked.
pub(super) struct NoElicitation;

impl Approver for NoElicitation {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, Approval> {
        DenyApprover.approve(request)
    }

    fn how_to_allow(&self) -> &str {
        "this MCP client does not support elicitation, so no one can be asked"
    }
}
