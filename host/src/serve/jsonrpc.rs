//! Incoming MCP messages checked the way JSON-RPC 2.0 requires, before rmcp
//! sees them: text that is not JSON is a parse error (`-32700`, `id: null`);
//! JSON that is not a JSON-RPC message is an invalid request (`-32600`, with
//! the request's id when it can be read, else `null`); a request of a known
//! method whose params do not fit is invalid params (`-32602`), where rmcp
//! would answer method not found. Both stdio and `/mcp` use these checks.

use rmcp::model::{ClientJsonRpcMessage, ClientRequest, JsonRpcMessage};
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
    if let Err(e) = values::within(bytes, MAX_VALUES) {
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
            values::Counted::Invalid(e) => {
                Refusal::new(Value::Null, PARSE_ERROR, format!("Parse error: {e}"))
            }
        });
    }
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

mod values {
    //! Counts the values of a JSON text without building them.
    use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

    pub(super) enum Counted {
        Over,
        Invalid(serde_json::Error),
    }

    /// Whether `bytes` hold at most `max` JSON values.
    pub(super) fn within(bytes: &[u8], max: usize) -> Result<(), Counted> {
        let mut left = max;
        let mut de = serde_json::Deserializer::from_slice(bytes);
        match (Count(&mut left))
            .deserialize(&mut de)
            .and_then(|()| de.end())
        {
            Ok(()) => Ok(()),
            Err(_) if left == 0 => Err(Counted::Over),
            Err(e) => Err(Counted::Invalid(e)),
        }
    }

    struct Count<'a>(&'a mut usize);

    /// What an array or an object counts, in values: built, each costs
    /// about as much as that many scalars (a map or a vector of its own).
    pub(super) const CONTAINER: usize = 16;

    impl Count<'_> {
        /// Counts the rest of what an array or object costs.
        fn container<E: serde::de::Error>(&mut self) -> Result<(), E> {
            match self.0.checked_sub(CONTAINER - 1) {
                Some(left) => {
                    *self.0 = left;
                    Ok(())
                }
                None => {
                    *self.0 = 0;
                    Err(E::custom("too many values"))
                }
            }
        }
    }

    impl<'de> DeserializeSeed<'de> for Count<'_> {
        type Value = ();
        fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<(), D::Error> {
            if *self.0 == 0 {
                return Err(serde::de::Error::custom("too many values"));
            }
            *self.0 -= 1;
            de.deserialize_any(self)
        }
    }

    impl<'de> Visitor<'de> for Count<'_> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("JSON")
        }
        fn visit_bool<E>(self, _: bool) -> Result<(), E> {
            Ok(())
        }
        fn visit_i64<E>(self, _: i64) -> Result<(), E> {
            Ok(())
        }
        fn visit_u64<E>(self, _: u64) -> Result<(), E> {
            Ok(())
        }
        fn visit_f64<E>(self, _: f64) -> Result<(), E> {
            Ok(())
        }
        fn visit_str<E>(self, _: &str) -> Result<(), E> {
            Ok(())
        }
        fn visit_unit<E>(self) -> Result<(), E> {
            Ok(())
        }
        fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
            self.container()?;
            while seq.next_element_seed(Count(&mut *self.0))?.is_some() {}
            Ok(())
        }
        fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
            self.container()?;
            // Each key is a string kept with its value: it counts too.
            while map.next_key::<serde::de::IgnoredAny>()?.is_some() {
                match self.0.checked_sub(1) {
                    Some(left) => *self.0 = left,
                    None => return Err(serde::de::Error::custom("too many values")),
                }
                map.next_value_seed(Count(&mut *self.0))?;
            }
            Ok(())
        }
    }
}

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
