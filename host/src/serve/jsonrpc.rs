//! Incoming MCP messages checked the way JSON-RPC 2.0 requires, before rmcp
//! sees them: text that is not JSON is a parse error (`-32700`, `id: null`);
//! JSON that is not a JSON-RPC message is an invalid request (`-32600`, with
//! the request's id when it can be read, else `null`); a request of a known
//! method whose params do not fit is invalid params (`-32602`), where rmcp
//! would answer method not found. Both stdio and `/mcp` use these checks.

use rmcp::model::{ClientJsonRpcMessage, ClientRequest, JsonRpcMessage, JsonRpcRequest};
use serde_json::{Value, json};

/// JSON-RPC's error codes used here.
pub(crate) const PARSE_ERROR: i64 = -32700;
pub(crate) const INVALID_REQUEST: i64 = -32600;
pub(crate) const INVALID_PARAMS: i64 = -32602;
pub(crate) const INTERNAL_ERROR: i64 = -32603;

/// The requests a client sends that rmcp knows; one of them that rmcp could
/// not read into its type had params that do not fit.
const KNOWN_METHODS: &[&str] = &[
    "initialize",
    "ping",
    "server/discover",
    "completion/complete",
    "logging/setLevel",
    "prompts/get",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "resources/directory/read",
    "subscriptions/listen",
    "tools/call",
    "tools/list",
    "tasks/get",
    "tasks/update",
    "tasks/cancel",
    "skills/list",
    "skills/get",
];

/// An error answer to a message that could not be served.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Refusal {
    /// The request's id, or `null` when it cannot be read.
    pub(crate) id: Value,
    pub(crate) code: i64,
    pub(crate) message: String,
}

impl Refusal {
    pub(crate) fn new(id: Value, code: i64, message: impl Into<String>) -> Self {
        Self {
            id,
            code,
            message: message.into(),
        }
    }

    /// The JSON-RPC error response.
    pub(crate) fn to_json(&self) -> Value {
        json!({
            "jsonrpc": "2.0",
            "id": self.id,
            "error": { "code": self.code, "message": self.message },
        })
    }

    /// The response as one line of the stdio transport.
    pub(crate) fn to_line(&self) -> Vec<u8> {
        let mut line = self.to_json().to_string().into_bytes();
        line.push(b'\n');
        line
    }
}

/// Reads one message. `Ok(None)`: a notification rmcp does not know, which
/// is ignored (notifications are never answered).
pub(crate) fn decode(bytes: &[u8]) -> Result<Option<ClientJsonRpcMessage>, Refusal> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let top = match values::within(bytes, MAX_VALUES) {
        Ok(top) => top,
        Err(e) => {
            return Err(match e {
                values::Counted::Over => Refusal::new(
                    Value::Null,
                    INVALID_REQUEST,
                    format!(
                        "Invalid Request: the message holds more than {MAX_VALUES} JSON values \
                     (numbers, strings, ...; each array or object counts as {}); send fewer",
                        values::CONTAINER
                    ),
                ),
                values::Counted::Reserved => Refusal::new(
                    Value::Null,
                    INVALID_REQUEST,
                    format!(
                        "Invalid Request: the message has a key beginning with {:?}, which the \
                         JSON reader gives a meaning of its own (it would read the key's string \
                         as JSON); rename the key",
                        crate::policy::reserved::RESERVED
                    ),
                ),
                values::Counted::Invalid(e) => {
                    Refusal::new(Value::Null, PARSE_ERROR, format!("Parse error: {e}"))
                }
            });
        }
    };
    if let Some(request) = direct(&top, bytes) {
        return Ok(Some(request));
    }
    decode_general(bytes)
}

/// The id the client gave a request that rmcp knows by one of the line
/// transport's own (in the request's extensions, and so in its handler's
/// context: [`super::mcp::client_id`]).
#[derive(Clone, Debug)]
pub(crate) struct ClientRequestId(pub(crate) rmcp::model::RequestId);

/// Reads a message the general way: rmcp's reading, which tries each kind
/// of message and then each of its requests in turn (untagged enums).
fn decode_general(bytes: &[u8]) -> Result<Option<ClientJsonRpcMessage>, Refusal> {
    match serde_json::from_slice::<ClientJsonRpcMessage>(bytes) {
        Ok(JsonRpcMessage::Request(request)) => match &request.request {
            ClientRequest::CustomRequest(custom)
                if KNOWN_METHODS.contains(&custom.method.as_str()) =>
            {
                Err(Refusal::new(
                    id_json(&request.id),
                    INVALID_PARAMS,
                    format!("Invalid params of {:?}", custom.method),
                ))
            }
            _ => {
                let mut request = request;
                // A session keeps what it was started with for its life:
                // of the experimental capabilities (free-form, any size)
                // only toolhost's own (its narrowing), which it reads.
                if let ClientRequest::SubscriptionsListenRequest(listen) = &mut request.request {
                    listen.extensions.insert(ListenTasks::of(bytes));
                }
                if let ClientRequest::InitializeRequest(initialize) = &mut request.request
                    && let Some(experimental) = &mut initialize.params.capabilities.experimental
                {
                    experimental.retain(|key, _| key == "toolhost");
                    if let Some(toolhost) = experimental.get_mut("toolhost") {
                        toolhost.retain(|key, _| key == "narrow");
                    }
                }
                Ok(Some(JsonRpcMessage::Request(request)))
            }
        },
        Ok(message) => Ok(Some(message)),
        Err(typed) => {
            let value: Value = serde_json::from_slice(bytes)
                .map_err(|e| Refusal::new(Value::Null, PARSE_ERROR, format!("Parse error: {e}")))?;
            classify(&value, &typed)
        }
    }
}

/// The requests most messages are (`tools/call`, `ping`, `tools/list`),
/// read straight into their type, as rmcp reads them once it has found
/// their kind: its general reading buffers the message and tries each kind
/// of message and each of the 22 requests before `tools/call` in turn,
/// building an error for each that does not fit. `None` for any other
/// message, or one that does not read this way: the general way then
/// decides as it always did. A property test holds the two to the same
/// answers.
fn direct(top: &values::Top, bytes: &[u8]) -> Option<ClientJsonRpcMessage> {
    use rmcp::model::{ListToolsRequest, PingRequest};
    if !top.id || top.answer {
        return None;
    }
    let request = match top.method.as_deref()? {
        "tools/call" => read_call(bytes)?,
        "ping" => read::<PingRequest>(bytes, ClientRequest::PingRequest)?,
        "tools/list" => read::<ListToolsRequest>(bytes, ClientRequest::ListToolsRequest)?,
        _ => return None,
    };
    Some(JsonRpcMessage::Request(request))
}

/// Reads `bytes` as a `tools/call` in one pass. rmcp's own reading of a
/// request flattens it twice (the request into the message, then the
/// request's `params` beside their `_meta`), so each buffers the arguments
/// before they are read. As rmcp does, `_meta` goes to the request's
/// extensions, not to its `params`.
fn read_call(bytes: &[u8]) -> Option<JsonRpcRequest<ClientRequest>> {
    use rmcp::model::{
        CallToolRequest, CallToolRequestMethod, CallToolRequestParams, JsonRpcVersion2_0, RequestId,
    };
    #[derive(serde::Deserialize)]
    struct Call {
        jsonrpc: JsonRpcVersion2_0,
        id: RequestId,
        #[serde(rename = "method")]
        _method: CallToolRequestMethod,
        params: CallToolRequestParams,
    }
    let Call {
        jsonrpc,
        id,
        mut params,
        ..
    } = serde_json::from_slice::<Call>(bytes).ok()?;
    let meta = params.meta.take();
    let mut request = CallToolRequest::new(params);
    if let Some(meta) = meta {
        request.extensions.insert(meta);
    }
    Some(JsonRpcRequest {
        jsonrpc,
        id,
        request: ClientRequest::CallToolRequest(request),
    })
}

/// Reads `bytes` as a request of kind `R`.
fn read<'a, R: serde::Deserialize<'a>>(
    bytes: &'a [u8],
    kind: fn(R) -> ClientRequest,
) -> Option<JsonRpcRequest<ClientRequest>> {
    let read = serde_json::from_slice::<JsonRpcRequest<R>>(bytes).ok()?;
    Some(JsonRpcRequest {
        jsonrpc: read.jsonrpc,
        id: read.id,
        request: kind(read.request),
    })
}

/// The tasks a `subscriptions/listen` request asks status notices of: the
/// Tasks extension's `notifications.taskIds`, which rmcp's filter does not
/// read. At most [`ListenTasks::MAX`], each at most 128 bytes and named
/// once; others are not listened to.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct ListenTasks(pub(crate) Vec<String>);

impl ListenTasks {
    /// The most task ids one stream listens to (a tenant runs at most
    /// `[tasks] max_per_tenant`, 32 by default).
    pub(crate) const MAX: usize = 64;

    fn of(bytes: &[u8]) -> Self {
        #[derive(serde::Deserialize)]
        struct Message {
            params: Params,
        }
        #[derive(serde::Deserialize)]
        struct Params {
            notifications: Filter,
        }
        #[derive(serde::Deserialize)]
        struct Filter {
            #[serde(rename = "taskIds", default)]
            task_ids: Vec<String>,
        }
        let ids = serde_json::from_slice::<Message>(bytes)
            .map(|m| m.params.notifications.task_ids)
            .unwrap_or_default();
        let mut kept: Vec<String> = Vec::new();
        for id in ids {
            // Each once: a repeated id would be told as many times.
            if id.len() <= 128 && !kept.contains(&id) && kept.len() < Self::MAX {
                kept.push(id);
            }
        }
        Self(kept)
    }
}

/// The most JSON values a message may hold: each is built into a tree
/// whose nodes cost far more than the bytes that spell them, and rmcp keeps
/// the tree while the request runs.
pub(crate) const MAX_VALUES: usize = 65_536;

mod values;

fn id_json(id: &rmcp::model::RequestId) -> Value {
    match id {
        rmcp::model::NumberOrString::Number(n) => json!(n),
        rmcp::model::NumberOrString::String(s) => json!(&**s),
    }
}

/// Why well-formed JSON is not a message rmcp can read.
fn classify(
    value: &Value,
    typed: &serde_json::Error,
) -> Result<Option<ClientJsonRpcMessage>, Refusal> {
    let invalid = |id: Value, why: String| Err(Refusal::new(id, INVALID_REQUEST, why));
    let Some(object) = value.as_object() else {
        let why = if value.is_array() {
            "Invalid Request: batches are not supported; send one message per line or request"
        } else {
            "Invalid Request: a JSON-RPC message is a JSON object"
        };
        return invalid(Value::Null, why.into());
    };
    let id = match object.get("id") {
        Some(id @ (Value::String(_) | Value::Number(_))) => id.clone(),
        _ => Value::Null,
    };
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return invalid(id, "Invalid Request: \"jsonrpc\" must be \"2.0\"".into());
    }
    let method = object.get("method").and_then(Value::as_str);
    match (method, object.get("id")) {
        // A notification is never answered, even one that does not fit.
        (Some(_), None) => Ok(None),
        (Some(method), Some(Value::String(_) | Value::Number(_)))
            if KNOWN_METHODS.contains(&method) =>
        {
            Err(Refusal::new(
                id,
                INVALID_PARAMS,
                format!("Invalid params of {method:?}: {typed}"),
            ))
        }
        _ => invalid(id, format!("Invalid Request: {typed}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(text: &[u8]) -> Refusal {
        decode(text).expect_err("refused")
    }

    #[test]
    fn what_is_not_json_is_a_parse_error_without_an_id() {
        for text in [&b"garbage"[..], b"{\"jsonrpc\":\"2.0\",", b"\xff\xfe{}"] {
            let refusal = refusal(text);
            assert_eq!((refusal.code, &refusal.id), (PARSE_ERROR, &Value::Null));
        }
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert_eq!(refusal(deep.as_bytes()).code, PARSE_ERROR);
    }

    #[test]
    fn a_message_of_too_many_values_is_refused_before_it_is_built() {
        let many = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"_meta":{{"x":[{}0]}}}}}}"#,
            "0,".repeat(MAX_VALUES)
        );
        let r = refusal(many.as_bytes());
        assert_eq!(r.code, INVALID_REQUEST, "{}", r.message);
        assert!(r.message.contains("65536 JSON values"), "{}", r.message);
        let fewer = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"_meta":{{"x":[{}0]}}}}}}"#,
            "0,".repeat(1000)
        );
        assert!(decode(fewer.as_bytes()).is_ok());
    }

    /// Keys count as values (each is a string kept with its value), so a
    /// message of 40,000 distinct keys is refused; an object of a few is
    /// served.
    #[test]
    fn object_keys_count_as_values() {
        let keys = |n: usize| {
            let keys: Vec<String> = (0..n).map(|k| format!(r#""k{k}":0"#)).collect();
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"_meta":{{"x":{{{}}}}}}}}}"#,
                keys.join(",")
            )
        };
        let r = refusal(keys(40_000).as_bytes());
        assert_eq!(r.code, INVALID_REQUEST, "{}", r.message);
        assert!(decode(keys(1000).as_bytes()).is_ok());
    }

    /// A session keeps of the experimental capabilities only toolhost's
    /// narrowing.
    #[test]
    fn initialize_keeps_only_the_narrowing_of_the_experimental_capabilities() {
        let text = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "clientInfo": {"name": "t", "version": "1"},
            "capabilities": {"experimental": {
                "other": {"pad": "x"},
                "toolhost": {"narrow": {"deny": ["file:write"]}, "pad": "y"}}}}})
        .to_string();
        let Ok(Some(JsonRpcMessage::Request(request))) = decode(text.as_bytes()) else {
            panic!("not decoded");
        };
        let ClientRequest::InitializeRequest(initialize) = request.request else {
            panic!("not initialize");
        };
        assert_eq!(
            json!(initialize.params.capabilities.experimental),
            json!({"toolhost": {"narrow": {"deny": ["file:write"]}}})
        );
    }

    /// A JSON value of any shape, a few levels deep.
    fn any_json() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            "[a-z\\\\\"\u{e9}\u{1F600}_]{0,8}".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                proptest::collection::btree_map("[a-z_]{1,6}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// The messages read straight into their type read as the general way
    /// reads them, whatever their ids, params, `_meta` and extra fields;
    /// and those the general way refuses are refused the same.
    #[test]
    fn the_requests_read_directly_read_as_the_general_way_reads_them() {
        use proptest::prelude::*;
        let method = prop_oneof![
            Just("tools/call"),
            Just("ping"),
            Just("tools/list"),
            Just("initialize"),
        ];
        let id = prop_oneof![
            any::<i64>().prop_map(Value::from),
            "[a-z0-9]{0,6}".prop_map(Value::from),
            Just(Value::Null),
        ];
        let params = prop_oneof![
            Just(None),
            any_json().prop_map(Some),
            (
                "[a-z_]{0,8}",
                proptest::option::of(any_json()),
                proptest::option::of(any_json()),
                proptest::option::of(any_json()),
            )
                .prop_map(|(name, arguments, meta, extra)| {
                    let mut params = json!({"name": name});
                    if let Some(arguments) = arguments {
                        params["arguments"] = arguments;
                    }
                    if let Some(meta) = meta {
                        params["_meta"] = meta;
                    }
                    if let Some(extra) = extra {
                        params["extra"] = extra;
                    }
                    Some(params)
                }),
        ];
        let extra = proptest::option::of(("[a-z]{1,6}", any_json()));
        let mut runner =
            proptest::test_runner::TestRunner::new(proptest::test_runner::Config::with_cases(2000));
        let direct_reads = std::cell::Cell::new(0);
        runner
            .run(
                &(method, id, params, extra, proptest::bool::weighted(0.9)),
                |(method, id, params, extra, has_id)| {
                    let mut message = json!({"jsonrpc": "2.0", "method": method});
                    if has_id {
                        message["id"] = id;
                    }
                    if let Some(params) = params {
                        message["params"] = params;
                    }
                    if let Some((key, value)) = extra {
                        message[key] = value;
                    }
                    let text = message.to_string();
                    // Serialized, `_meta` reads the same from the params
                    // as from the extensions: where it went is shown too
                    // (the server reads it from the extensions).
                    let shown =
                        |decoded: &Result<Option<ClientJsonRpcMessage>, Refusal>| match decoded {
                            Ok(message) => {
                                let metas = match message {
                                    Some(JsonRpcMessage::Request(JsonRpcRequest {
                                        request: ClientRequest::CallToolRequest(call),
                                        ..
                                    })) => json!([
                                        call.extensions.get::<rmcp::model::RequestMetaObject>(),
                                        call.params.meta,
                                    ]),
                                    _ => Value::Null,
                                };
                                json!([serde_json::to_value(message).unwrap(), metas])
                            }
                            Err(refusal) => refusal.to_json(),
                        };
                    let top = values::within(text.as_bytes(), MAX_VALUES)
                        .unwrap_or_else(|_| panic!("counted: {text}"));
                    if direct(&top, text.as_bytes()).is_some() {
                        direct_reads.set(direct_reads.get() + 1);
                    }
                    prop_assert_eq!(
                        shown(&decode(text.as_bytes())),
                        shown(&decode_general(text.as_bytes())),
                        "{}",
                        text
                    );
                    Ok(())
                },
            )
            .unwrap();
        // Most of them took the direct way: the comparison compared it.
        let direct_reads = direct_reads.get();
        assert!(direct_reads > 300, "{direct_reads} read directly");
    }

    /// serde_json builds an object whose first key is its raw-value token
    /// from the JSON text in its string: uncounted by the cap, and another
    /// value than the bytes spell. Such keys are refused at any depth, as
    /// the first key or not, escaped or not.
    #[test]
    fn keys_the_json_reader_reserves_are_refused() {
        let zeros = format!("[{}0]", "0,".repeat(MAX_VALUES));
        for text in [
            json!({"jsonrpc": "2.0", "id": 1, "method": "ping",
                "params": {"_meta": {"x": {"$serde_json::private::RawValue": zeros}}}})
            .to_string(),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo",
                "arguments": {"text": {"$serde_json::private::RawValue": "\"smuggled\""}}}})
            .to_string(),
            r#"{"jsonrpc":"2.0","id":{"$serde_json::private::RawValue":"5"},"method":"ping"}"#
                .to_string(),
            r#"{"$serde_json::private::RawValue":"{}","jsonrpc":"2.0","id":1,"method":"ping"}"#
                .to_string(),
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":1,"\u0024serde_json::private::Number":"1"}}"#
                .to_string(),
        ] {
            let r = refusal(text.as_bytes());
            assert_eq!(r.code, INVALID_REQUEST, "{text}: {}", r.message);
            assert!(r.message.contains("rename the key"), "{}", r.message);
        }
        // The name elsewhere (a value, part of a longer key) is any text.
        let fine = json!({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"_meta": {
            "x": "$serde_json::private::RawValue", "my$serde_json::private::RawValue": 1}}});
        assert!(decode(fine.to_string().as_bytes()).unwrap().is_some());
    }

    #[test]
    fn the_top_level_is_read_in_the_counting_pass() {
        let top = |text: &str| values::within(text.as_bytes(), MAX_VALUES).ok().unwrap();
        let read = top(r#"{"id":1,"jsonrpc":"2.0","method":"tools/call","params":{"method":"x"}}"#);
        assert_eq!(read.method.as_deref(), Some("tools/call"));
        assert!(read.id && !read.answer);
        let answer = top(r#"{"id":1,"jsonrpc":"2.0","result":{}}"#);
        assert!(answer.answer && answer.method.is_none());
        let long = format!(r#"{{"method":"{}"}}"#, "m".repeat(65));
        assert_eq!(top(&long).method, None);
        assert_eq!(top(r#"{"method":["tools/call"]}"#).method, None);
        assert_eq!(
            top(r#"[{"method":"tools/call","id":1}]"#),
            values::Top::default()
        );
    }

    #[test]
    fn a_request_that_does_not_fit_keeps_its_id() {
        let r = refusal(br#"{"jsonrpc":"1.0","id":7,"method":"ping"}"#);
        assert_eq!((r.code, r.id), (INVALID_REQUEST, json!(7)));
        let r = refusal(br#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"x","arguments":[]}}"#);
        assert_eq!((r.code, r.id), (INVALID_PARAMS, json!("a")));
        let r = refusal(br#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#);
        assert_eq!((r.code, r.id), (INVALID_REQUEST, Value::Null));
        assert!(matches!(
            decode(br#"{"jsonrpc":"2.0","method":"notifications/whatever","params":3}"#),
            Ok(None)
        ));
        assert!(
            decode(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)
                .unwrap()
                .is_some()
        );
    }
}
