//! Results beyond JSON (contract 0.2.2): a PNG reaches an MCP client as
//! image content; every kind of block with structured content; icons in
//! `tools/list`; the `/v1` shapes (Chat Completions text parts, Responses
//! input parts); binary data counted toward the output limit as base64; MIME
//! types and URIs refused unless allowed; structured content checked
//! against the output schema; the audit records types and sizes only; the
//! CLI prints a summary or writes the blocks to files.

use std::path::Path;

use base64::Engine as _;
use rmcp::model::ContentBlock;
use serde_json::{Value, json};
use toolhost::audit::AuditLog;
use toolhost::config::{Config, ConfigSource};
use toolhost::serve::http::{HttpServer, ServeOptions};
use toolhost::{ErrorKind, Host};

use crate::mcp::{call, connect};
use crate::{Buffer, call_err, call_ok, test_limits};

/// The media guest's PNG, as base64 (the conformance suite's 1×1 red PNG).
const PNG_BASE64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";

async fn media() -> Host {
    Host::builder()
        .plugin_file(toolhost_tests::MEDIA)
        .limits(test_limits())
        .build()
        .await
        .unwrap()
}

/// A host with the media guest under a configuration whose `[results]` is
/// `results`.
async fn media_with(results: &str) -> Host {
    let text = format!("default_profile = \"p\"\n[profiles.p]\n{results}");
    let root = tempfile::tempdir().unwrap();
    let config = Config::parse(&text, ConfigSource::Embedded, root.path()).unwrap();
    Host::builder()
        .config(&config)
        .unwrap()
        .bundled(false)
        .plugin_file(toolhost_tests::MEDIA)
        .build()
        .await
        .unwrap()
}

fn batch(format: Option<&str>, calls: &[&str]) -> Value {
    let calls: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, name)| {
            json!({ "id": format!("call_{i}"), "type": "function",
                    "function": { "name": name, "arguments": "{}" } })
        })
        .collect();
    let mut batch = json!({ "tool_calls": calls });
    if let Some(format) = format {
        batch["format"] = json!(format);
    }
    batch
}

#[tokio::test]
async fn a_png_reaches_an_mcp_client_as_image_content() {
    let (client, _) = connect(media().await, None).await;
    let result = client
        .call_tool(call("media_png", json!({})))
        .await
        .unwrap();
    assert_ne!(result.is_error, Some(true));
    let [ContentBlock::Image(image)] = result.content.as_slice() else {
        panic!("not one image: {:?}", result.content);
    };
    assert_eq!(image.mime_type, "image/png");
    assert_eq!(image.data, PNG_BASE64);
    assert_eq!(result.structured_content, None);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn every_kind_of_block_and_structured_content_reach_an_mcp_client() {
    let (client, _) = connect(media().await, None).await;
    let result = client
        .call_tool(call("media_kinds", json!({})))
        .await
        .unwrap();
    let blocks = serde_json::to_value(&result.content).unwrap();
    let types: Vec<&str> = blocks
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        [
            "text",
            "image",
            "audio",
            "resource_link",
            "resource",
            "resource"
        ]
    );
    assert_eq!(blocks[2]["mimeType"], "audio/wav");
    assert_eq!(
        blocks[3],
        json!({ "type": "resource_link", "uri": "https://example.com/report.csv",
                "name": "report.csv", "description": "the full report",
                "mimeType": "text/csv", "size": 1234 })
    );
    assert_eq!(
        blocks[4]["resource"],
        json!({ "uri": "file:///notes.md", "mimeType": "text/markdown", "text": "# notes" })
    );
    assert_eq!(blocks[5]["resource"]["blob"], "JVBERi0xLjQ=");
    assert_eq!(result.structured_content, Some(json!({ "blocks": 6 })));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn tools_list_carries_the_icons_a_plugin_gives() {
    let (client, _) = connect(media().await, None).await;
    let tools = client.list_all_tools().await.unwrap();
    let icons = |name: &str| {
        let tool = tools.iter().find(|t| t.name == name).unwrap();
        serde_json::to_value(&tool.icons).unwrap()
    };
    assert_eq!(
        icons("media_png"),
        json!([
            { "src": format!("data:image/png;base64,{PNG_BASE64}"), "mimeType": "image/png" },
            { "src": "https://example.com/media.png", "mimeType": "image/png" },
        ])
    );
    assert_eq!(
        icons("media_counted"),
        json!([{ "src": "https://example.com/counted.webp", "mimeType": "image/webp",
                 "sizes": ["48x48"] }])
    );
    assert_eq!(icons("media_svg"), Value::Null);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn chat_completions_results_are_text_parts_with_binary_blocks_described() {
    let host = media().await;
    let results = toolhost::serve::openai::dispatch_batch(
        &host,
        &batch(None, &["media_kinds", "media_link"]),
        None,
    )
    .await;
    let first = &results["tool_results"][0];
    assert_eq!(first["role"], "tool");
    assert_eq!(first["tool_call_id"], "call_0");
    assert_eq!(
        first["content"],
        json!([
            { "type": "text", "text": "every kind:" },
            { "type": "text", "text": "[image: image/png, 70 bytes; not included: a tool message carries text only]" },
            { "type": "text", "text": "[audio: audio/wav, 12 bytes; not included: a tool message carries text only]" },
            { "type": "text", "text": "[resource link: report.csv <https://example.com/report.csv>, text/csv, 1234 bytes] the full report" },
            { "type": "text", "text": "[resource file:///notes.md (text/markdown)]\n# notes" },
            { "type": "text", "text": "[resource file:///report.pdf: application/pdf, 8 bytes; not included: a tool message carries text only]" },
        ])
    );
    // A failed call (missing argument) stays a JSON text, as before.
    let error = results["tool_results"][1]["content"].as_str().unwrap();
    assert!(
        error.starts_with(r#"{"error":"invalid_arguments: "#),
        "{error}"
    );
}

#[tokio::test]
async fn responses_results_carry_images_and_files_as_such() {
    let host = media().await;
    // Entries as the Responses API gives them are accepted too.
    let request = json!({
        "format": "responses",
        "tool_calls": [
            { "type": "function_call", "call_id": "fc_1", "name": "media_kinds", "arguments": "{}" },
            { "type": "function_call", "call_id": "fc_2", "name": "media_counted",
              "arguments": "{\"mode\":\"good\"}" },
        ],
    });
    let results = toolhost::serve::openai::dispatch_batch(&host, &request, None).await;
    let first = &results["tool_results"][0];
    assert_eq!(first["type"], "function_call_output");
    assert_eq!(first["call_id"], "fc_1");
    let output = first["output"].as_array().unwrap();
    assert_eq!(
        output[0],
        json!({ "type": "input_text", "text": "every kind:" })
    );
    assert_eq!(
        output[1],
        json!({ "type": "input_image", "image_url": format!("data:image/png;base64,{PNG_BASE64}") })
    );
    assert_eq!(output[2]["type"], "input_file");
    assert_eq!(output[2]["filename"], "block-2.wav");
    assert!(
        output[2]["file_data"]
            .as_str()
            .unwrap()
            .starts_with("data:audio/wav;base64,")
    );
    assert_eq!(output[3]["type"], "input_text");
    assert_eq!(
        output[5],
        json!({ "type": "input_file", "filename": "block-5.pdf",
                "file_data": "data:application/pdf;base64,JVBERi0xLjQ=" })
    );
    assert_eq!(
        results["tool_results"][1]["output"],
        json!([{ "type": "input_text", "text": "counted" }])
    );
}

#[tokio::test]
async fn the_v1_route_answers_in_the_format_asked_and_refuses_unknown_ones() {
    let server = HttpServer::bind(media().await, "127.0.0.1:0", ServeOptions::default())
        .await
        .unwrap();
    let url = format!("http://{}/v1/tool_calls", server.local_addr());
    tokio::spawn(async move { server.run(std::future::pending()).await.unwrap() });
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let post = |body: Value| {
        client
            .post(&url)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
    };
    // The two shapes the README shows for a tool returning one PNG.
    let answer = post(batch(None, &["media_png"])).await.unwrap();
    assert_eq!(answer.status(), 200);
    let body: Value = answer.json().await.unwrap();
    assert_eq!(
        body,
        json!({ "tool_results": [{
            "content": [{ "type": "text",
                "text": "[image: image/png, 70 bytes; not included: a tool message carries text only]" }],
            "name": "media_png", "role": "tool", "tool_call_id": "call_0",
        }] })
    );
    let responses = json!({ "format": "responses", "tool_calls": [
        { "type": "function_call", "call_id": "call_0", "name": "media_png", "arguments": "{}" },
    ] });
    let answer = post(responses).await.unwrap();
    assert_eq!(answer.status(), 200);
    let body: Value = answer.json().await.unwrap();
    assert_eq!(
        body,
        json!({ "tool_results": [{
            "call_id": "call_0", "type": "function_call_output",
            "output": [{ "type": "input_image",
                "image_url": format!("data:image/png;base64,{PNG_BASE64}") }],
        }] })
    );
    let answer = post(batch(Some("chat"), &["media_png"])).await.unwrap();
    let body: Value = answer.json().await.unwrap();
    assert_eq!(body["tool_results"][0]["content"][0]["type"], "text");

    let refused = post(batch(Some("xml"), &["media_png"])).await.unwrap();
    assert_eq!(refused.status(), 400);
    let body: Value = refused.json().await.unwrap();
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .starts_with("invalid_request: unknown format \"xml\"; use \"chat\""),
        "{body}"
    );
}

#[tokio::test]
async fn binary_data_counts_toward_the_output_limit_as_base64() {
    let host = media().await;
    // 40,000 bytes are 53,336 as base64: under the 64 KiB limit.
    let fits = host.call("media_sized", r#"{"bytes":40000}"#).await;
    assert!(fits.is_ok(), "{fits:?}");
    // 60,000 bytes are under the limit as bytes, but 80,000 as base64.
    let (kind, error) = call_err(&host, "media_sized", r#"{"bytes":60000}"#).await;
    assert_eq!(kind, ErrorKind::OutputTooLarge, "{error}");
    assert!(
        error.contains("returned 80057 bytes (binary data counted as base64, text as JSON), more than the limit of 65536 bytes"),
        "{error}"
    );
}

#[tokio::test]
async fn text_counts_toward_the_output_limit_as_sent_in_json() {
    let host = media().await;
    let text = |fill: &str, count: usize| json!({ "fill": fill, "count": count }).to_string();
    let text = |fill: &str, count: usize| -> &'static str { text(fill, count).leak() };
    // 65,488 characters and a block's 48 bytes are the 64 KiB limit.
    let fits = host.call("media_text", text("A", 65_488)).await;
    assert!(fits.is_ok(), "{fits:?}");
    let (kind, error) = call_err(&host, "media_text", text("A", 65_489)).await;
    assert_eq!(kind, ErrorKind::OutputTooLarge, "{error}");
    // NUL is `\u0000` in JSON: 6 bytes each, so 10,914 fit and 10,915 do not.
    let fits = host.call("media_text", text("\0", 10_914)).await;
    assert!(fits.is_ok(), "{fits:?}");
    for (fill, count, sent) in [
        ("\0", 10_915, 65_538),
        ("\0", 65_488, 392_976),
        ("\"", 40_000, 80_048),
    ] {
        let (kind, error) = call_err(&host, "media_text", text(fill, count)).await;
        assert_eq!(kind, ErrorKind::OutputTooLarge, "{fill:?}: {error}");
        assert!(
            error.contains(&format!("returned {sent} bytes (binary data counted as base64, text as JSON), more than the limit of 65536 bytes")),
            "{error}"
        );
    }
}

#[tokio::test]
async fn svg_and_html_are_refused_by_default_and_allowed_by_name() {
    let host = media().await;
    let (kind, error) = call_err(&host, "media_svg", "{}").await;
    assert_eq!(kind, ErrorKind::InvalidOutput, "{error}");
    assert!(
        error.contains("content block 0: MIME type \"image/svg+xml\" is not allowed; the host's results.mime_types allows image/png, "),
        "{error}"
    );
    let (kind, error) = call_err(&host, "media_html", "{}").await;
    assert_eq!(kind, ErrorKind::InvalidOutput, "{error}");
    assert!(error.contains("\"text/html\" is not allowed"), "{error}");

    let allowing = media_with("[results]\nmime_types = [\"image/svg+xml\"]").await;
    let svg = call_ok(&allowing, "media_svg", "{}").await;
    assert_eq!(svg["content"][0]["mimeType"], "image/svg+xml");
    // The list replaces the default: PNG is no longer allowed.
    let (kind, _) = call_err(&allowing, "media_png", "{}").await;
    assert_eq!(kind, ErrorKind::InvalidOutput);
}

#[tokio::test]
async fn links_to_script_or_data_uris_are_refused() {
    let host = media().await;
    for uri in [
        "javascript:alert(1)",
        "JavaScript:alert(1)",
        "data:text/html,x",
        "no-scheme",
        "https://a b",
    ] {
        let arguments = json!({ "uri": uri }).to_string();
        let (kind, error) = call_err(&host, "media_link", &arguments).await;
        assert_eq!(kind, ErrorKind::InvalidOutput, "{uri}: {error}");
    }
    for uri in ["https://example.com/x", "file:///tmp/x", "repo://a/b"] {
        let arguments = json!({ "uri": uri }).to_string();
        let linked = call_ok(&host, "media_link", &arguments).await;
        assert_eq!(linked["content"][0]["uri"], uri);
    }
}

#[tokio::test]
async fn structured_content_must_match_the_output_schema() {
    let host = media().await;
    let good = call_ok(&host, "media_counted", r#"{"mode":"good"}"#).await;
    assert_eq!(good["structuredContent"], json!({ "count": 1 }));
    for mode in ["bad", "none"] {
        let arguments = json!({ "mode": mode }).to_string();
        let (kind, error) = call_err(&host, "media_counted", &arguments).await;
        assert_eq!(kind, ErrorKind::InvalidOutput, "{mode}: {error}");
    }
}

#[tokio::test]
async fn the_audit_records_block_types_and_sizes_never_content() {
    let buffer = Buffer::default();
    let host = Host::builder()
        .plugin_file(toolhost_tests::MEDIA)
        .audit(AuditLog::writer(buffer.clone()))
        .build()
        .await
        .unwrap();
    call_ok(&host, "media_kinds", "{}").await;
    let line: Value = serde_json::from_str(buffer.text().lines().next().unwrap()).unwrap();
    assert_eq!(
        line["content"],
        json!([
            { "type": "text", "bytes": 11 },
            { "type": "image", "mime_type": "image/png", "bytes": 70 },
            { "type": "audio", "mime_type": "audio/wav", "bytes": 12 },
            { "type": "resource_link", "mime_type": "text/csv", "bytes": 0 },
            { "type": "resource", "mime_type": "text/markdown", "bytes": 7 },
            { "type": "resource", "mime_type": "application/pdf", "bytes": 8 },
        ])
    );
    let text = buffer.text();
    for secret in [
        "every kind",
        PNG_BASE64,
        "# notes",
        "report.csv",
        "JVBERi0xLjQ=",
    ] {
        assert!(!text.contains(secret), "the audit holds {secret:?}: {text}");
    }
}

#[test]
fn mime_types_must_be_exact_lower_case_types() {
    let text = r#"
default_profile = "p"
[profiles.p]
[results]
mime_types = ["image/png", "image/*", "Image/GIF", "text/plain; charset=utf-8", "png", "image/png"]
"#;
    let error = Config::parse(text, ConfigSource::Embedded, Path::new("/")).unwrap_err();
    let keys: Vec<&str> = error.problems.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        keys,
        [
            "results.mime_types[1]",
            "results.mime_types[2]",
            "results.mime_types[3]",
            "results.mime_types[4]",
            "results.mime_types[5]",
        ],
        "{error}"
    );
    assert!(error.to_string().contains("is listed twice"), "{error}");
}

#[test]
fn the_cli_prints_a_summary_or_writes_the_blocks_to_files() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    std::fs::copy(toolhost_tests::MEDIA, plugins.join("media.wasm")).unwrap();
    let toolhost = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_toolhost-cli"))
            .current_dir(dir.path())
            .args(["--plugins", "plugins", "--no-bundled", "call"])
            .args(args)
            .env_remove("RUST_LOG")
            .output()
            .unwrap()
    };
    let output = toolhost(&["media_kinds"]);
    assert!(output.status.success(), "{output:?}");
    let printed: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        printed["content"][0],
        json!({ "type": "text", "text": "every kind:" })
    );
    assert_eq!(
        printed["content"][1],
        json!({ "type": "image", "mimeType": "image/png", "bytes": 70 })
    );
    assert_eq!(printed["structuredContent"], json!({ "blocks": 6 }));
    assert!(!String::from_utf8_lossy(&output.stdout).contains(PNG_BASE64));

    std::fs::create_dir(dir.path().join("out")).unwrap();
    let output = toolhost(&["--save-content", "out", "media_kinds"]);
    assert!(output.status.success(), "{output:?}");
    let printed: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(printed["content"][1]["file"], "out/media_kinds-1.png");
    assert_eq!(printed["content"][2]["file"], "out/media_kinds-2.wav");
    assert_eq!(printed["content"][5]["file"], "out/media_kinds-3.pdf");
    let png = std::fs::read(dir.path().join("out/media_kinds-1.png")).unwrap();
    assert_eq!(
        png,
        base64::engine::general_purpose::STANDARD
            .decode(PNG_BASE64)
            .unwrap()
    );
    // Never over a file that is there: the next numbers.
    std::fs::write(dir.path().join("out/media_kinds-2.png"), "kept").unwrap();
    let again = toolhost(&["--save-content", "out", "media_kinds"]);
    assert!(again.status.success(), "{again:?}");
    let printed: Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(printed["content"][1]["file"], "out/media_kinds-3.png");
    assert_eq!(printed["content"][2]["file"], "out/media_kinds-4.wav");
    assert_eq!(printed["content"][5]["file"], "out/media_kinds-5.pdf");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("out/media_kinds-2.png")).unwrap(),
        "kept"
    );
}
