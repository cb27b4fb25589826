//! Telemetry: metrics, traces and usage the host records about calls. An
//! empty home for now; every floor may record into it, so it imports nothing
//! of ours.
