//! A scripted model server for the real agent CLIs (tests/e2e/real_clis.rs).
//!
//! It listens on 127.0.0.1 only, speaks just enough HTTP/1.1 for one request
//! per connection (`Connection: close`), and answers the model APIs the CLIs
//! call: the Anthropic Messages API with SSE (Claude Code, and Copilot CLI
//! with a BYOK provider of type `anthropic`), the OpenAI Responses API
//! with SSE (Codex) and the Gemini API's `streamGenerateContent` with SSE
//! (Gemini CLI, `GOOGLE_GEMINI_BASE_URL`). Each answer plays the next step of a
//! script: step `i` is asked for once the request carries `i` tool results,
//! and after the last step the model says it is done. Every request is kept,
//! so a test reads what the CLI sent back after each tool call (the guard's
//! reason reaches the model as the tool result).

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

/// The tokens every answer reports using: input not read from a cache,
/// input read from one, output (issue 38: `runs --json` must show exactly
/// these, times the answers given).
pub const TOKENS: (u64, u64, u64) = (1000, 200, 50);

/// One tool call the model asks for.
#[derive(Clone, Debug)]
pub enum Step {
    /// Create a file with this content (Claude Code `Write`, Codex
    /// `apply_patch` through `exec_command`).
    Write(String, String),
    /// Run a shell command (Claude Code `Bash`, Codex `exec_command`).
    Shell(String),
    /// Run a shell command outside the sandbox: Codex `exec_command` with
    /// `sandbox_permissions: "require_escalated"` (which an interactive
    /// Codex asks its person to approve); [`Step::Shell`] for the others.
    Escalated(String),
    /// Call a tool of the MCP server `squad` with these arguments, by the
    /// name each CLI gives it: Claude Code `mcp__squad__<tool>` (called by
    /// name: newer Claude Code defers MCP tools behind ToolSearch), Codex
    /// `<tool>` in the namespace `mcp__squad`, Copilot CLI `squad-<tool>`.
    Mcp(String, Value),
}

/// One request the stub received.
#[derive(Clone, Debug)]
pub struct Request {
    /// Request line target (`/v1/messages?beta=true`).
    pub path: String,
    /// The body as JSON (`Value::Null` when it was not JSON).
    pub body: Value,
}

/// The server; stops accepting when dropped.
pub struct StubModel {
    port: u16,
    requests: Arc<Mutex<Vec<Request>>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
}

impl StubModel {
    /// Starts the server on an ephemeral loopback port, playing `steps`.
    pub fn start(steps: Vec<Step>) -> StubModel {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let port = listener.local_addr().expect("local addr").port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (reqs, halt) = (requests.clone(), stop.clone());
        let steps = Arc::new(steps);
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if halt.load(std::sync::atomic::Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let (reqs, steps) = (reqs.clone(), steps.clone());
                std::thread::spawn(move || serve(conn, &reqs, &steps));
            }
        });
        StubModel {
            port,
            requests,
            stop,
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<Request> {
        self.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// What the CLI sent back as the result of step `i` (the tool result's
    /// JSON, as text), from the first request that carries it.
    pub fn tool_result(&self, i: usize) -> Option<String> {
        let id = call_id(i);
        self.requests().iter().find_map(|r| {
            results(&r.body)
                .into_iter()
                .find(|(call, _)| *call == id)
                .map(|(_, v)| v.to_string())
        })
    }

    /// How many model answers were given (each reports [`TOKENS`]).
    pub fn answers(&self) -> u64 {
        self.requests()
            .iter()
            .filter(|r| {
                let route = r.path.split('?').next().unwrap_or("");
                (route.ends_with("/messages") && anthropic_model(&r.body))
                    || route.ends_with("/responses")
                    || route.ends_with(":streamGenerateContent")
            })
            .count() as u64
    }

    /// A summary of the requests, for failure messages.
    pub fn transcript(&self) -> String {
        self.requests()
            .iter()
            .map(|r| {
                let mut s = r.body.to_string();
                if s.len() > 600 {
                    let cut = (0..=600)
                        .rev()
                        .find(|&i| s.is_char_boundary(i))
                        .unwrap_or(0);
                    s.truncate(cut);
                }
                format!("{} {s}\n", r.path)
            })
            .collect()
    }
}

impl Drop for StubModel {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

fn call_id(i: usize) -> String {
    format!("call_squad_{i}")
}

/// The tool results a request carries: (call id, the result item).
fn results(body: &Value) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    // Anthropic: messages[].content[] of type tool_result.
    for m in body["messages"].as_array().into_iter().flatten() {
        for c in m["content"].as_array().into_iter().flatten() {
            if c["type"] == "tool_result" {
                out.push((
                    c["tool_use_id"].as_str().unwrap_or("").to_string(),
                    c.clone(),
                ));
            }
        }
    }
    // Gemini API: contents[].parts[].functionResponse. Gemini CLI gives
    // its calls ids of its own: the n-th response answers step n.
    let mut n = 0;
    for c in body["contents"].as_array().into_iter().flatten() {
        for part in c["parts"].as_array().into_iter().flatten() {
            if part.get("functionResponse").is_some() {
                out.push((call_id(n), part["functionResponse"].clone()));
                n += 1;
            }
        }
    }
    // Responses API: input[] of type function_call_output / custom_tool_call_output.
    for item in body["input"].as_array().into_iter().flatten() {
        let t = item["type"].as_str().unwrap_or("");
        if t.ends_with("_call_output") {
            out.push((
                item["call_id"].as_str().unwrap_or("").to_string(),
                item.clone(),
            ));
        }
    }
    out
}

/// Reads one request, answers it, closes.
fn serve(mut conn: TcpStream, reqs: &Mutex<Vec<Request>>, steps: &[Step]) {
    let Ok(clone) = conn.try_clone() else { return };
    let mut reader = BufReader::new(clone);
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or("").to_string();
    let path = parts.next().unwrap_or("").to_string();
    let (mut length, mut chunked, mut encoding) = (0usize, false, String::new());
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).unwrap_or(0) == 0 {
            break;
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let Some((name, value)) = h.split_once(':') else {
            continue;
        };
        let (name, value) = (name.trim().to_ascii_lowercase(), value.trim());
        match name.as_str() {
            "content-length" => length = value.parse().unwrap_or(0),
            "transfer-encoding" => chunked = value.eq_ignore_ascii_case("chunked"),
            "content-encoding" => encoding = value.to_ascii_lowercase(),
            _ => {}
        }
    }
    let mut raw = Vec::new();
    if chunked {
        loop {
            let mut size = String::new();
            if reader.read_line(&mut size).unwrap_or(0) == 0 {
                break;
            }
            let n = usize::from_str_radix(size.trim().split(';').next().unwrap_or("0"), 16)
                .unwrap_or(0);
            let mut chunk = vec![0; n + 2];
            if n == 0 || reader.read_exact(&mut chunk).is_err() {
                break;
            }
            raw.extend_from_slice(&chunk[..n]);
        }
    } else {
        raw.resize(length, 0);
        if reader.read_exact(&mut raw).is_err() {
            return;
        }
    }
    let body: Value = if encoding.is_empty() {
        serde_json::from_slice(&raw).unwrap_or(Value::Null)
    } else {
        Value::String(format!("<{encoding}-encoded body of {} bytes>", raw.len()))
    };
    if let Ok(mut r) = reqs.lock() {
        r.push(Request {
            path: path.clone(),
            body: body.clone(),
        });
    }
    let route = path.split('?').next().unwrap_or("");
    let (status, kind, payload) = if method != "POST" {
        (200, "application/json", "{}".to_string())
    } else if route.ends_with("/messages") && !anthropic_model(&body) {
        // As the real API answers a model name it does not know (the old
        // default `claude-sonnet-4.5` is one: Anthropic names use hyphens).
        (
            404,
            "application/json",
            json!({"type": "error", "error": {"type": "not_found_error", "message": format!("model: {}", body["model"])}}).to_string(),
        )
    } else if route.ends_with("/messages") {
        (200, "text/event-stream", anthropic(&body, steps))
    } else if route.ends_with("/responses") {
        (200, "text/event-stream", responses(&body, steps))
    } else if route.ends_with(":streamGenerateContent") {
        (200, "text/event-stream", gemini(route, &body, steps))
    } else {
        (
            404,
            "application/json",
            r#"{"error":"not scripted"}"#.to_string(),
        )
    };
    let head = format!(
        "HTTP/1.1 {status} X\r\ncontent-type: {kind}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        payload.len()
    );
    let _ = conn.write_all(head.as_bytes());
    let _ = conn.write_all(payload.as_bytes());
    let _ = conn.flush();
}

/// Whether the request names a model the way the Anthropic API does
/// (`claude-sonnet-4-5`, `claude-haiku-4-5-20251001`): lower-case words and
/// numbers joined by hyphens, no dots.
fn anthropic_model(body: &Value) -> bool {
    body["model"].as_str().is_some_and(|m| {
        m.starts_with("claude-")
            && m.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    })
}

/// Which step a request asks for: `Some(i)` for step i, `None` when the
/// model should end its turn (all steps done, or a side request without
/// tools such as a title).
fn next_step(body: &Value, steps: &[Step]) -> Option<usize> {
    if body["tools"].as_array().is_none_or(|t| t.is_empty()) {
        return None;
    }
    let done = results(body).len();
    (done < steps.len()).then_some(done)
}

fn sse(event: &str, data: &Value) -> String {
    format!("event: {event}\ndata: {data}\n\n")
}

/// An Anthropic Messages API stream: one tool_use or one text block.
fn anthropic(body: &Value, steps: &[Step]) -> String {
    let model = body["model"].as_str().unwrap_or("stub");
    // A message id of its own for each answer, as the API gives.
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let id = format!(
        "msg_stub_{}",
        N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    let mut out = sse(
        "message_start",
        &json!({"type": "message_start", "message": {"id": id, "type": "message", "role": "assistant", "model": model, "content": [], "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": TOKENS.0, "cache_read_input_tokens": TOKENS.1, "cache_creation_input_tokens": 0, "output_tokens": 1}}}),
    );
    let stop = match next_step(body, steps) {
        Some(i) => {
            // Copilot CLI (BYOK, provider type anthropic) offers its own
            // tools on the same API: `create` and `bash`.
            let copilot = body["tools"]
                .as_array()
                .is_some_and(|t| t.iter().any(|t| t["name"] == "create"));
            let (name, input): (String, Value) = match (&steps[i], copilot) {
                (Step::Write(path, content), false) => (
                    "Write".into(),
                    json!({"file_path": path, "content": content}),
                ),
                (Step::Shell(command) | Step::Escalated(command), false) => {
                    ("Bash".into(), json!({"command": command}))
                }
                (Step::Write(path, content), true) => {
                    ("create".into(), json!({"path": path, "file_text": content}))
                }
                (Step::Shell(command) | Step::Escalated(command), true) => (
                    "bash".into(),
                    json!({"command": command, "description": "run", "mode": "sync"}),
                ),
                (Step::Mcp(tool, args), false) => (format!("mcp__squad__{tool}"), args.clone()),
                (Step::Mcp(tool, args), true) => (format!("squad-{tool}"), args.clone()),
            };
            out += &sse(
                "content_block_start",
                &json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": call_id(i), "name": name, "input": {}}}),
            );
            out += &sse(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": input.to_string()}}),
            );
            "tool_use"
        }
        None => {
            out += &sse(
                "content_block_start",
                &json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            );
            out += &sse(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "done"}}),
            );
            "end_turn"
        }
    };
    out += &sse(
        "content_block_stop",
        &json!({"type": "content_block_stop", "index": 0}),
    );
    out += &sse(
        "message_delta",
        &json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": TOKENS.2}}),
    );
    out += &sse("message_stop", &json!({"type": "message_stop"}));
    out
}

/// A Gemini API stream (`streamGenerateContent?alt=sse`): one chunk with a
/// function call or a text, and the usage (`promptTokenCount` includes the
/// cached tokens). Gemini CLI 0.61 offers `write_file`, `run_shell_command`
/// and MCP tools named `mcp_<server>_<tool>`.
fn gemini(route: &str, body: &Value, steps: &[Step]) -> String {
    let model = route
        .rsplit('/')
        .next()
        .and_then(|m| m.split(':').next())
        .unwrap_or("gemini");
    let declared: Vec<String> = body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|t| {
            t["functionDeclarations"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|d| d["name"].as_str().map(str::to_string))
        .collect();
    let part = match next_step(body, steps) {
        Some(i) => {
            let (name, args) = match &steps[i] {
                Step::Write(path, content) => (
                    "write_file".to_string(),
                    json!({"file_path": path, "content": content}),
                ),
                Step::Shell(command) | Step::Escalated(command) => (
                    "run_shell_command".to_string(),
                    json!({"command": command, "description": "run"}),
                ),
                Step::Mcp(tool, args) => (
                    declared
                        .iter()
                        .find(|d| d.contains("squad") && d.ends_with(tool.as_str()))
                        .cloned()
                        .unwrap_or_else(|| format!("mcp_squad_{tool}")),
                    args.clone(),
                ),
            };
            json!({"functionCall": {"id": call_id(i), "name": name, "args": args}})
        }
        None => json!({"text": "done"}),
    };
    let chunk = json!({
        "candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": TOKENS.0 + TOKENS.1, "cachedContentTokenCount": TOKENS.1, "candidatesTokenCount": TOKENS.2, "totalTokenCount": TOKENS.0 + TOKENS.1 + TOKENS.2},
        "modelVersion": model,
    });
    format!("data: {chunk}\r\n\r\n")
}

/// An OpenAI Responses API stream: one function call or one message.
/// Codex 0.169 offers `exec_command` (`{"cmd": …}`); a file is written
/// with `apply_patch` fed a heredoc, which Codex runs as its patch tool.
/// `login: false` keeps the caller's PATH (a login shell would reset it
/// from /etc/profile and lose the test's squadctl).
fn responses(body: &Value, steps: &[Step]) -> String {
    let exec = |i: usize, cmd: String| json!({"type": "function_call", "id": format!("fc_{i}"), "call_id": call_id(i), "name": "exec_command", "arguments": json!({"cmd": cmd, "tty": false, "login": false}).to_string()});
    let item = match next_step(body, steps) {
        Some(i) => match &steps[i] {
            Step::Write(path, content) => {
                let mut patch =
                    format!("apply_patch <<'PATCH'\n*** Begin Patch\n*** Add File: {path}\n");
                for l in content.lines() {
                    patch += &format!("+{l}\n");
                }
                patch += "*** End Patch\nPATCH\n";
                exec(i, patch)
            }
            Step::Shell(command) => exec(i, command.clone()),
            Step::Escalated(command) => {
                json!({"type": "function_call", "id": format!("fc_{i}"), "call_id": call_id(i), "name": "exec_command", "arguments": json!({"cmd": command, "tty": false, "login": false, "sandbox_permissions": "require_escalated", "justification": "Write the file the task asks for."}).to_string()})
            }
            Step::Mcp(tool, args) => {
                json!({"type": "function_call", "id": format!("fc_{i}"), "call_id": call_id(i), "namespace": "mcp__squad", "name": tool, "arguments": args.to_string()})
            }
        },
        None => {
            json!({"type": "message", "id": "msg_stub", "role": "assistant", "status": "completed", "content": [{"type": "output_text", "text": "done", "annotations": []}]})
        }
    };
    let response = json!({"id": "resp_stub", "object": "response", "status": "completed", "output": [item.clone()], "usage": {"input_tokens": TOKENS.0 + TOKENS.1, "input_tokens_details": {"cached_tokens": TOKENS.1}, "output_tokens": TOKENS.2, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": TOKENS.0 + TOKENS.1 + TOKENS.2}});
    let mut out = sse(
        "response.created",
        &json!({"type": "response.created", "response": {"id": "resp_stub"}}),
    );
    out += &sse(
        "response.output_item.done",
        &json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
    );
    out += &sse(
        "response.completed",
        &json!({"type": "response.completed", "response": response}),
    );
    out
}
