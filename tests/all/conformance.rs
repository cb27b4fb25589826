//! The MCP conformance suite's tool fixtures (`tests/plugins/conformance`)
//! through an MCP client over Streamable HTTP, answering with the suite's
//! reference results: image, audio, embedded resource, mixed content and a
//! tool error. (`scripts/conformance.sh` runs the suite itself in CI.)

use serde_json::{Value, json};
use toolhost::Host;

use crate::mcp::{call, http_client, serve_http};

/// The suite's reference PNG and WAV, as base64.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
const WAV: &str = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";

#[tokio::test]
async fn the_suites_content_fixtures_answer_with_its_reference_results() {
    let host = Host::builder()
        .plugin_file(toolhost_tests::CONFORMANCE)
        .build()
        .await
        .unwrap();
    let client = http_client(&serve_http(host).await).await;
    let content = |name: &'static str| {
        let client = &client;
        async move {
            let result = client.call_tool(call(name, json!({}))).await.unwrap();
            assert_ne!(result.is_error, Some(true), "{name}: {result:?}");
            serde_json::to_value(&result.content).unwrap()
        }
    };
    assert_eq!(
        content("test_image_content").await,
        json!([{ "type": "image", "data": PNG, "mimeType": "image/png" }])
    );
    assert_eq!(
        content("test_audio_content").await,
        json!([{ "type": "audio", "data": WAV, "mimeType": "audio/wav" }])
    );
    assert_eq!(
        content("test_embedded_resource").await,
        json!([{ "type": "resource", "resource": {
            "uri": "test://embedded-resource", "mimeType": "text/plain",
            "text": "This is an embedded resource content.",
        } }])
    );
    assert_eq!(
        content("test_multiple_content_types").await,
        json!([
            { "type": "text", "text": "Multiple content types test:" },
            { "type": "image", "data": PNG, "mimeType": "image/png" },
            { "type": "resource", "resource": {
                "uri": "test://mixed-content-resource", "mimeType": "application/json",
                "text": "{\"test\":\"data\",\"value\":123}",
            } },
        ])
    );
    let failed = client
        .call_tool(call("test_error_handling", json!({})))
        .await
        .unwrap();
    assert_eq!(failed.is_error, Some(true));
    let text: Value = serde_json::to_value(&failed.content).unwrap();
    assert!(
        text[0]["text"]
            .as_str()
            .unwrap()
            .contains("This tool intentionally returns an error for testing"),
        "{text}"
    );
    client.cancel().await.unwrap();
}
