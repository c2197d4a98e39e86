//! The conformance fixture catalog served by `genmcp serve --conformance`: every
//! tool, resource and prompt the official suite calls, by exact name, in the
//! order `docs/conformance-notes.md` requires (`tools[0]` is `test_simple_text`,
//! `resources[0]` is `test://static-text`, the first `x-mcp-header` tool has a
//! string header parameter), and everything on the first page of each list.

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use crate::protocol::{Implementation, LogLevel, McpError};
use crate::suite::{
    CallToolResult, Catalog, CatalogSubscriptions, Completions, Content, GetPromptResult,
    InputRequired, PromptBuilder, PromptMessage, ReadOutcome, Resource, ResourceContents,
    ResourceSet, ResourceTemplate, Suite, ToolBuilder, ToolCall, ToolOutcome, WeakCatalog,
};

/// The tool `test_trigger_tool_change` adds and removes.
pub const DYNAMIC_TOOL: &str = "test_dynamic_tool";
/// The prompt `test_trigger_prompt_change` adds and removes.
pub const DYNAMIC_PROMPT: &str = "test_dynamic_prompt";
/// The resource prefix `test_trigger_resource_list_change` adds and removes.
pub const DYNAMIC_RESOURCES: &str = "test://dynamic/";

// ---- media ------------------------------------------------------------------

fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn adler32(bytes: &[u8]) -> u32 {
    let (mut a, mut b) = (1u32, 0u32);
    for &x in bytes {
        a = (a + u32::from(x)) % 65521;
        b = (b + a) % 65521;
    }
    (b << 16) | a
}

fn png_chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend_from_slice(&u32::try_from(data.len()).unwrap_or(0).to_be_bytes());
    let start = out.len();
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    let crc = crc32(&out[start..]);
    out.extend_from_slice(&crc.to_be_bytes());
}

/// A valid 1x1 red PNG (RGB, 8 bits, one stored deflate block).
pub fn red_pixel_png() -> Vec<u8> {
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut ihdr = Vec::new();
    ihdr.extend_from_slice(&1u32.to_be_bytes());
    ihdr.extend_from_slice(&1u32.to_be_bytes());
    ihdr.extend_from_slice(&[8, 2, 0, 0, 0]);
    png_chunk(&mut png, b"IHDR", &ihdr);
    let raw = [0u8, 0xFF, 0x00, 0x00]; // filter byte + one RGB pixel
    let len = u16::try_from(raw.len()).unwrap_or(0);
    let mut zlib = vec![0x78, 0x01, 0x01];
    zlib.extend_from_slice(&len.to_le_bytes());
    zlib.extend_from_slice(&(!len).to_le_bytes());
    zlib.extend_from_slice(&raw);
    zlib.extend_from_slice(&adler32(&raw).to_be_bytes());
    png_chunk(&mut png, b"IDAT", &zlib);
    png_chunk(&mut png, b"IEND", &[]);
    png
}

/// A valid WAV: 0.05 s of a 440 Hz square wave, 8 kHz, 8-bit mono PCM.
pub fn beep_wav() -> Vec<u8> {
    let rate = 8000u32;
    let samples: Vec<u8> = (0..400u32)
        .map(|i| {
            if (i * 440 * 2 / rate).is_multiple_of(2) {
                160
            } else {
                96
            }
        })
        .collect();
    let data_len = u32::try_from(samples.len()).unwrap_or(0);
    let mut wav = Vec::with_capacity(44 + samples.len());
    wav.extend_from_slice(b"RIFF");
    wav.extend_from_slice(&(36 + data_len).to_le_bytes());
    wav.extend_from_slice(b"WAVEfmt ");
    wav.extend_from_slice(&16u32.to_le_bytes()); // fmt chunk size
    wav.extend_from_slice(&1u16.to_le_bytes()); // PCM
    wav.extend_from_slice(&1u16.to_le_bytes()); // mono
    wav.extend_from_slice(&rate.to_le_bytes());
    wav.extend_from_slice(&rate.to_le_bytes()); // byte rate
    wav.extend_from_slice(&1u16.to_le_bytes()); // block align
    wav.extend_from_slice(&8u16.to_le_bytes()); // bits per sample
    wav.extend_from_slice(b"data");
    wav.extend_from_slice(&data_len.to_le_bytes());
    wav.extend_from_slice(&samples);
    wav
}

fn png_b64() -> String {
    STANDARD.encode(red_pixel_png())
}

fn wav_b64() -> String {
    STANDARD.encode(beep_wav())
}

// ---- helpers ----------------------------------------------------------------

fn text(t: impl Into<String>) -> Result<ToolOutcome, McpError> {
    Ok(CallToolResult::text(t).into())
}

fn string_schema(field: &str) -> Value {
    json!({"type": "object", "properties": {field: {"type": "string"}}, "required": [field]})
}

fn confirm_schema() -> Value {
    json!({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]})
}

fn field<'a>(call: &'a ToolCall, key: &str, name: &str) -> Option<&'a str> {
    call.elicited(key)?.get(name)?.as_str()
}

/// The `action` of an elicitation answer, when it is declined or cancelled.
fn refused(call: &ToolCall, key: &str) -> Option<String> {
    let action = call.input(key)?.get("action")?.as_str()?;
    (action == "decline" || action == "cancel").then(|| action.to_owned())
}

fn with_catalog(weak: &WeakCatalog) -> Result<Catalog, McpError> {
    weak.upgrade()
        .ok_or_else(|| McpError::internal("Internal error: the catalog is gone"))
}

// ---- tools ------------------------------------------------------------------

fn content_tools(catalog: &Catalog) {
    catalog.add_tool(
        ToolBuilder::new("test_simple_text")
            .description("Returns a simple text response")
            .handler(|_call| async { text("This is a simple text response for testing.") }),
    );
    catalog.add_tool(
        ToolBuilder::new("test_image_content")
            .description("Returns a 1x1 red PNG image")
            .handler(|_call| async {
                Ok(CallToolResult::new(vec![Content::image(png_b64(), "image/png")]).into())
            }),
    );
    catalog.add_tool(
        ToolBuilder::new("test_audio_content")
            .description("Returns a short WAV audio clip")
            .handler(|_call| async {
                Ok(CallToolResult::new(vec![Content::audio(wav_b64(), "audio/wav")]).into())
            }),
    );
    catalog.add_tool(
        ToolBuilder::new("test_embedded_resource")
            .description("Returns an embedded text resource")
            .handler(|_call| async {
                Ok(
                    CallToolResult::new(vec![Content::resource(ResourceContents::text(
                        "test://embedded-resource",
                        "text/plain",
                        "This is an embedded resource content.",
                    ))])
                    .into(),
                )
            }),
    );
    catalog.add_tool(
        ToolBuilder::new("test_multiple_content_types")
            .description("Returns text, an image and an embedded resource")
            .handler(|_call| async {
                Ok(CallToolResult::new(vec![
                    Content::text("Multiple content types test:"),
                    Content::image(png_b64(), "image/png"),
                    Content::resource(ResourceContents::text(
                        "test://mixed-content-resource",
                        "application/json",
                        r#"{"test":"data","value":123}"#,
                    )),
                ])
                .into())
            }),
    );
    catalog.add_tool(
        ToolBuilder::new("test_error_handling")
            .description("Always fails with a tool-level error (isError: true)")
            .handler(|_call| async {
                Ok(
                    CallToolResult::error("This tool intentionally returns an error for testing")
                        .into(),
                )
            }),
    );
    catalog.add_tool(
        ToolBuilder::new("test_tool_with_progress")
            .description("Reports progress 0, 50 and 100 of 100, about 50 ms apart")
            .handler(|call| async move {
                // A refused progress send (client gone, outbox full) only loses that notification.
                let _ = call
                    .channel
                    .send_progress(0.0, Some(100.0), Some("Starting"));
                tokio::time::sleep(Duration::from_millis(50)).await;
                let _ = call
                    .channel
                    .send_progress(50.0, Some(100.0), Some("Halfway"));
                tokio::time::sleep(Duration::from_millis(50)).await;
                let _ = call.channel.send_progress(100.0, Some(100.0), Some("Done"));
                text("Progress test completed")
            }),
    );
    catalog.add_tool(
        ToolBuilder::new("test_resource_link")
            .description("Returns a link to the static text resource")
            .handler(|_call| async {
                Ok(CallToolResult::new(vec![Content::resource_link(
                    "test://static-text",
                    "static-text",
                )])
                .into())
            }),
    );
    catalog.add_tool(
        ToolBuilder::new("test_structured_content")
            .description("Returns structured content matching its output schema")
            .output_schema(json!({"type": "object", "properties": {"temperature": {"type": "number"}, "unit": {"type": "string"}}, "required": ["temperature", "unit"]}))
            .handler(|_call| async {
                let data = json!({"temperature": 21.5, "unit": "celsius"});
                Ok(CallToolResult::text(data.to_string()).with_structured(data).into())
            }),
    );
}

fn diagnostic_tools(catalog: &Catalog) {
    catalog.add_tool(
        ToolBuilder::new("test_missing_capability")
            .description("Needs the sampling client capability (-32021 without it)")
            .handler(|call| async move {
                match call.sampled_text("capability_probe") {
                    Some(answer) => text(format!("Sampling answered: {answer}")),
                    None => Ok(InputRequired::new()
                        .sample("capability_probe", "Reply with anything", 10)
                        .into()),
                }
            }),
    );
    catalog.add_tool(
        ToolBuilder::new("test_streaming_elicitation")
            .description("Asks for a confirmation through MRTR, never a server-to-client request")
            .handler(|call| async move {
                if let Some(ok) = call.elicited("confirmation").and_then(|c| c.get("ok")) {
                    return text(format!("Confirmation received: {ok}"));
                }
                let _ =
                    call.channel
                        .send_progress(0.0, Some(1.0), Some("Waiting for confirmation"));
                Ok(InputRequired::new()
                    .elicit(
                        "confirmation",
                        "Please confirm to continue",
                        confirm_schema(),
                    )
                    .into())
            }),
    );
    catalog.add_tool(
        ToolBuilder::new("test_logging_tool")
            .description("Logs at info, warning and error, only when the request sets a log level")
            .handler(|call| async move {
                let logger = Some("test_logging_tool");
                let _ = call
                    .channel
                    .send_log(LogLevel::Info, logger, json!("info message"));
                let _ = call
                    .channel
                    .send_log(LogLevel::Warning, logger, json!("warning message"));
                let _ = call.channel.send_log(
                    LogLevel::Error,
                    logger,
                    json!({"error": "error message"}),
                );
                text("Logging test completed")
            }),
    );
    let weak = catalog.downgrade();
    catalog.add_tool(
        ToolBuilder::new("test_trigger_tool_change")
            .description("Adds or removes test_dynamic_tool and notifies listen streams")
            .handler(move |_call| {
                let weak = weak.clone();
                async move {
                    let catalog = with_catalog(&weak)?;
                    if catalog.remove_tool(DYNAMIC_TOOL) {
                        return text(format!("{DYNAMIC_TOOL} removed"));
                    }
                    catalog.add_tool(
                        ToolBuilder::new(DYNAMIC_TOOL)
                            .description("Appears and disappears with test_trigger_tool_change")
                            .handler(|_call| async { text("dynamic tool called") }),
                    );
                    text(format!("{DYNAMIC_TOOL} added"))
                }
            }),
    );
    let weak = catalog.downgrade();
    catalog.add_tool(
        ToolBuilder::new("test_trigger_prompt_change")
            .description("Adds or removes test_dynamic_prompt and notifies listen streams")
            .handler(move |_call| {
                let weak = weak.clone();
                async move {
                    let catalog = with_catalog(&weak)?;
                    if catalog.remove_prompt(DYNAMIC_PROMPT) {
                        return text(format!("{DYNAMIC_PROMPT} removed"));
                    }
                    catalog.add_prompt(
                        PromptBuilder::new(DYNAMIC_PROMPT)
                            .description("Appears and disappears with test_trigger_prompt_change")
                            .handler(|_get| async {
                                Ok(GetPromptResult::user_text("A dynamic prompt.").into())
                            }),
                    );
                    text(format!("{DYNAMIC_PROMPT} added"))
                }
            }),
    );
    let weak = catalog.downgrade();
    catalog.add_tool(
        ToolBuilder::new("test_trigger_resource_update")
            .description("Notifies listen streams subscribed to uri (default test://static-text) that it changed")
            .input_schema(json!({"type": "object", "properties": {"uri": {"type": "string"}}}))
            .handler(move |call| {
                let weak = weak.clone();
                async move {
                    let catalog = with_catalog(&weak)?;
                    let uri = call
                        .arguments
                        .get("uri")
                        .and_then(Value::as_str)
                        .unwrap_or("test://static-text")
                        .to_owned();
                    catalog.resource_updated(uri.clone());
                    text(format!("{uri} updated"))
                }
            }),
    );
    let weak = catalog.downgrade();
    catalog.add_tool(
        ToolBuilder::new("test_trigger_resource_list_change")
            .description(
                "Adds or removes the test://dynamic/ resources and notifies listen streams",
            )
            .handler(move |_call| {
                let weak = weak.clone();
                async move {
                    let catalog = with_catalog(&weak)?;
                    if catalog.remove_resources(DYNAMIC_RESOURCES) {
                        return text("dynamic resources removed");
                    }
                    catalog.add_resources(
                        ResourceSet::new(DYNAMIC_RESOURCES).text(
                            Resource::new("test://dynamic/one", "dynamic-one")
                                .description(
                                    "Appears and disappears with test_trigger_resource_list_change",
                                )
                                .mime_type("text/plain"),
                            "A dynamic resource.",
                        ),
                    );
                    text("dynamic resources added")
                }
            }),
    );
}

fn mrtr_tools(catalog: &Catalog) {
    catalog.add_tool(
        ToolBuilder::new("test_input_required_result_elicitation")
            .description("MRTR: asks for the user's name through elicitation, then greets")
            .handler(|call| async move {
                if let Some(name) = field(&call, "user_name", "name") {
                    return text(format!("Hello, {name}!"));
                }
                if let Some(action) = refused(&call, "user_name") {
                    return text(format!("No name given (the user chose {action})."));
                }
                Ok(InputRequired::new()
                    .elicit("user_name", "What is your name?", string_schema("name"))
                    .into())
            }),
    );
    catalog.add_tool(
        ToolBuilder::new("test_input_required_result_sampling")
            .description("MRTR: asks the client's model a question through sampling")
            .handler(|call| async move {
                match call.sampled_text("capital_question") {
                    Some(answer) => text(format!("The model answered: {answer}")),
                    None => Ok(InputRequired::new()
                        .sample("capital_question", "What is the capital of France?", 100)
                        .into()),
                }
            }),
    );
    catalog.add_tool(
        ToolBuilder::new("test_input_required_result_list_roots")
            .description("MRTR: asks the client for its roots")
            .handler(|call| async move {
                match call.roots("client_roots") {
                    Some(roots) => text(format!("Client roots: {}", roots.join(", "))),
                    None => Ok(InputRequired::new().list_roots("client_roots").into()),
                }
            }),
    );
    catalog.add_tool(
        ToolBuilder::new("test_input_required_result_request_state")
            .description("MRTR: carries a sealed requestState to the retry")
            .handler(|call| async move {
                let state_ok = call.request_state == Some(json!({"phase": "confirm"}));
                if let (true, Some(answer)) = (state_ok, call.elicited("confirm")) {
                    let ok = answer.get("ok").cloned().unwrap_or(Value::Null);
                    return text(format!("state-ok: confirmed={ok}"));
                }
                Ok(InputRequired::new()
                    .elicit("confirm", "Please confirm", confirm_schema())
                    .with_state(json!({"phase": "confirm"}))
                    .into())
            }),
    );
    catalog.add_tool(
        ToolBuilder::new("test_input_required_result_multiple_inputs")
            .description("MRTR: asks for elicitation, sampling and roots in one round")
            .handler(|call| async move {
                let name = field(&call, "user_name", "name");
                let greeting = call.sampled_text("greeting");
                let roots = call.roots("client_roots");
                let state_ok = call.request_state == Some(json!({"phase": "multiple"}));
                if let (true, Some(name), Some(greeting), Some(roots)) =
                    (state_ok, name, greeting, &roots)
                {
                    return text(format!(
                        "Hello, {name}! Greeting: {greeting} Roots: {}",
                        roots.join(", ")
                    ));
                }
                let mut round = InputRequired::new().with_state(json!({"phase": "multiple"}));
                if !state_ok || name.is_none() {
                    round = round.elicit("user_name", "What is your name?", string_schema("name"));
                }
                if !state_ok || greeting.is_none() {
                    round = round.sample("greeting", "Generate a greeting", 50);
                }
                if !state_ok || roots.is_none() {
                    round = round.list_roots("client_roots");
                }
                Ok(round.into())
            }),
    );
    catalog.add_tool(
        ToolBuilder::new("test_input_required_result_multi_round")
            .description("MRTR: two rounds of elicitation, each with a new requestState")
            .handler(|call| async move {
                let round = call
                    .request_state
                    .as_ref()
                    .and_then(|s| s.get("round"))
                    .and_then(Value::as_u64);
                match round {
                    Some(2) => {
                        let name = call
                            .request_state
                            .as_ref()
                            .and_then(|s| s.get("name"))
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned();
                        if let Some(color) = field(&call, "step2", "color") {
                            return text(format!("Hello, {name}! Your favorite color is {color}."));
                        }
                        Ok(InputRequired::new()
                            .elicit(
                                "step2",
                                "Step 2: What is your favorite color?",
                                string_schema("color"),
                            )
                            .with_state(json!({"round": 2, "name": name}))
                            .into())
                    }
                    Some(1) if field(&call, "step1", "name").is_some() => {
                        let name = field(&call, "step1", "name").unwrap_or_default();
                        Ok(InputRequired::new()
                            .elicit(
                                "step2",
                                "Step 2: What is your favorite color?",
                                string_schema("color"),
                            )
                            .with_state(json!({"round": 2, "name": name}))
                            .into())
                    }
                    _ => Ok(InputRequired::new()
                        .elicit("step1", "Step 1: What is your name?", string_schema("name"))
                        .with_state(json!({"round": 1}))
                        .into()),
                }
            }),
    );
    catalog.add_tool(
        ToolBuilder::new("test_input_required_result_tampered_state")
            .description("MRTR: its requestState is integrity-protected; a tampered one is -32602")
            .handler(|call| async move {
                let state_ok = call.request_state == Some(json!({"check": "integrity"}));
                if let (true, Some(_)) = (state_ok, call.elicited("confirm")) {
                    return text("state verified");
                }
                Ok(InputRequired::new()
                    .elicit("confirm", "Please confirm", confirm_schema())
                    .with_state(json!({"check": "integrity"}))
                    .into())
            }),
    );
    catalog.add_tool(
        ToolBuilder::new("test_input_required_result_capabilities")
            .description("MRTR: asks only for what the request's client capabilities declare")
            .handler(|call| async move {
                let caps = call.channel.meta().client_capabilities.clone();
                let mut answers = Vec::new();
                if let Some(name) = field(&call, "user_name", "name") {
                    answers.push(format!("name={name}"));
                }
                if let Some(t) = call.sampled_text("greeting") {
                    answers.push(format!("greeting={t}"));
                }
                if let Some(r) = call.roots("client_roots") {
                    answers.push(format!("roots={}", r.join(",")));
                }
                if !answers.is_empty() {
                    return text(format!("Received: {}", answers.join("; ")));
                }
                let mut round = InputRequired::new();
                if caps.declares("elicitation") {
                    round = round.elicit("user_name", "What is your name?", string_schema("name"));
                }
                if caps.declares("sampling") {
                    round = round.sample("greeting", "Generate a greeting", 50);
                }
                if caps.declares("roots") {
                    round = round.list_roots("client_roots");
                }
                if round.input_requests.is_empty() {
                    return text("No client capability declared: nothing to ask.");
                }
                Ok(round.into())
            }),
    );
}

fn schema_tools(catalog: &Catalog) {
    catalog.add_tool(
        ToolBuilder::new("json_schema_2020_12_tool")
            .description("Tool with JSON Schema 2020-12 features")
            .input_schema(json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "$defs": {"address": {"$anchor": "addressDef", "type": "object",
                    "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
                "properties": {
                    "name": {"type": "string"},
                    "address": {"$ref": "#/$defs/address"},
                    "contactMethod": {"type": "string", "enum": ["phone", "email"]},
                    "phone": {"type": "string"},
                    "email": {"type": "string"}
                },
                "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
                "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
                "then": {"required": ["phone"]},
                "else": {"required": ["email"]},
                "additionalProperties": false
            }))
            .handler(|call| async move {
                let who = call.arguments.get("name").and_then(Value::as_str).unwrap_or("someone");
                text(format!("Contact details accepted for {who}"))
            }),
    );
    catalog.add_tool(
        ToolBuilder::new("test_custom_header")
            .description("Echoes a value mirrored into the Mcp-Param-Region header")
            .input_schema(json!({
                "type": "object",
                "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
                "required": ["region"]
            }))
            .handler(|call| async move {
                let region = call
                    .arguments
                    .get("region")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                text(format!("region={region}"))
            }),
    );
}

// ---- prompts ----------------------------------------------------------------

fn prompts(catalog: &Catalog) {
    catalog.add_prompt(
        PromptBuilder::new("test_simple_prompt")
            .description("A simple prompt without arguments")
            .handler(|_get| async {
                Ok(GetPromptResult::user_text("This is a simple prompt for testing.").into())
            }),
    );
    catalog.add_prompt(
        PromptBuilder::new("test_prompt_with_arguments")
            .description("A prompt with two required arguments")
            .argument("arg1", "First test argument", true)
            .argument("arg2", "Second test argument", true)
            .handler(|get| async move {
                Ok(GetPromptResult::user_text(format!(
                    "Prompt with arguments: arg1='{}', arg2='{}'",
                    get.arg("arg1").unwrap_or_default(),
                    get.arg("arg2").unwrap_or_default()
                ))
                .into())
            }),
    );
    catalog.add_prompt(
        PromptBuilder::new("test_prompt_with_embedded_resource")
            .description("A prompt that embeds the resource named by resourceUri")
            .argument("resourceUri", "URI of the resource to embed", true)
            .handler(|get| async move {
                let uri = get.arg("resourceUri").unwrap_or_default().to_owned();
                Ok(GetPromptResult::new(vec![
                    PromptMessage::user(Content::resource(ResourceContents::text(
                        uri,
                        "text/plain",
                        "Embedded resource content for testing.",
                    ))),
                    PromptMessage::user(Content::text(
                        "Please process the embedded resource above.",
                    )),
                ])
                .into())
            }),
    );
    catalog.add_prompt(
        PromptBuilder::new("test_prompt_with_image")
            .description("A prompt with an image")
            .handler(|_get| async {
                Ok(GetPromptResult::new(vec![
                    PromptMessage::user(Content::image(png_b64(), "image/png")),
                    PromptMessage::user(Content::text("Please analyze the image above.")),
                ])
                .into())
            }),
    );
    catalog.add_prompt(
        PromptBuilder::new("test_input_required_result_prompt")
            .description("MRTR through prompts/get: asks which context to use")
            .handler(|get| async move {
                if let Some(context) = get
                    .elicited("user_context")
                    .and_then(|c| c.get("context"))
                    .and_then(Value::as_str)
                {
                    return Ok(
                        GetPromptResult::user_text(format!("Prompt context: {context}")).into(),
                    );
                }
                Ok(InputRequired::new()
                    .elicit(
                        "user_context",
                        "What context should the prompt use?",
                        string_schema("context"),
                    )
                    .into())
            }),
    );
}

// ---- resources --------------------------------------------------------------

fn resources(catalog: &Catalog) {
    catalog.add_resources(
        ResourceSet::new("test://")
            .text(
                Resource::new("test://static-text", "static-text")
                    .description("A static text resource")
                    .mime_type("text/plain"),
                "This is the content of the static text resource.",
            )
            .blob(
                Resource::new("test://static-binary", "static-binary")
                    .description("A static binary resource (a 1x1 PNG)")
                    .mime_type("image/png"),
                png_b64(),
            )
            .template(
                ResourceTemplate::new("test://template/{id}/data", "template-data")
                    .description("A templated JSON resource")
                    .mime_type("application/json"),
                |read| async move {
                    let id = read.var("id").unwrap_or_default().to_owned();
                    let body = json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")});
                    Ok(ReadOutcome::from(ResourceContents::text(
                        read.uri,
                        "application/json",
                        body.to_string(),
                    )))
                },
            ),
    );
}

/// The fixture suite.
pub fn suite() -> Suite<CatalogSubscriptions> {
    let catalog = Catalog::new();
    content_tools(&catalog);
    diagnostic_tools(&catalog);
    mrtr_tools(&catalog);
    schema_tools(&catalog);
    prompts(&catalog);
    resources(&catalog);
    catalog.set_completer(
        Completions::new()
            .prompt_argument(
                "test_prompt_with_arguments",
                "arg1",
                ["test", "testing", "test-value-1", "paris", "python"],
            )
            .prompt_argument(
                "test_prompt_with_arguments",
                "arg2",
                ["test", "world", "value"],
            )
            .template_variable("test://template/{id}/data", "id", ["123", "124", "456"]),
    );
    Suite::builder(Implementation::new(
        "genmcp-conformance",
        env!("CARGO_PKG_VERSION"),
    ))
    .instructions("Conformance fixtures for the official MCP conformance suite.")
    // test_logging_tool sends notifications/message (when asked with a logLevel).
    .logging()
    .catalog(catalog.clone())
    .subscriptions(CatalogSubscriptions::new(&catalog))
    .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn media_are_well_formed() {
        let png = red_pixel_png();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        assert_eq!(&png[12..16], b"IHDR");
        // IHDR CRC over type + data.
        let crc = u32::from_be_bytes([png[29], png[30], png[31], png[32]]);
        assert_eq!(crc, crc32(&png[12..29]));
        assert_eq!(&png[png.len() - 8..png.len() - 4], b"IEND");
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(adler32(b"Wikipedia"), 0x11E6_0398);
        let wav = beep_wav();
        assert_eq!(&wav[..4], b"RIFF");
        assert_eq!(
            u32::from_le_bytes([wav[4], wav[5], wav[6], wav[7]]) as usize,
            wav.len() - 8
        );
        assert_eq!(&wav[36..40], b"data");
    }

    #[test]
    fn catalog_order_and_names_follow_the_notes() {
        let s = suite();
        let names = s.catalog().tool_names();
        assert_eq!(names[0], "test_simple_text");
        for required in [
            "test_image_content",
            "test_audio_content",
            "test_embedded_resource",
            "test_multiple_content_types",
            "test_error_handling",
            "test_tool_with_progress",
            "test_missing_capability",
            "test_streaming_elicitation",
            "test_logging_tool",
            "test_trigger_tool_change",
            "test_trigger_prompt_change",
            "test_input_required_result_elicitation",
            "test_input_required_result_sampling",
            "test_input_required_result_list_roots",
            "test_input_required_result_request_state",
            "test_input_required_result_multiple_inputs",
            "test_input_required_result_multi_round",
            "test_input_required_result_tampered_state",
            "test_input_required_result_capabilities",
            "json_schema_2020_12_tool",
            "test_custom_header",
        ] {
            assert!(names.iter().any(|n| n == required), "{required} missing");
        }
        for tool in s.catalog().tools() {
            let d = tool.descriptor();
            assert!(
                d.description.as_deref().is_some_and(|x| !x.is_empty()),
                "{}",
                d.name
            );
            assert!(
                s.catalog()
                    .tool_entry(&d.name)
                    .is_some_and(|e| e.schema.is_ok()),
                "{}",
                d.name
            );
        }
        assert_eq!(
            s.catalog().prompt_names(),
            vec![
                "test_simple_prompt",
                "test_prompt_with_arguments",
                "test_prompt_with_embedded_resource",
                "test_prompt_with_image",
                "test_input_required_result_prompt",
            ]
        );
    }
}
