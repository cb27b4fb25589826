//! Replicas of one host behind a load balancer: a call that names another
//! replica's handle is forwarded to it, and conversation state (`handles`)
//! is kept where every replica reaches it. An empty home for now.
