//! An OpenAI-compatible chat-completions endpoint (OpenAI, vLLM, Ollama, LiteLLM proxies):
//! one POST per step, asking for a JSON object. The reply is untrusted input: its size is
//! capped, it must be a chat completion whose message content is one JSON object, and that
//! object goes through the same policy as every step.

use super::{ProposeError, Proposer, StepContext};
use crate::policy::{AgentStep, RawStep, CATEGORIES};
use aorta_registry::Registry;
use serde::{Deserialize, Serialize};
use std::io::Read;
use std::time::Duration;

/// A reply larger than this is refused: a proposal is a few hundred bytes.
const MAX_REPLY_BYTES: u64 = 1 << 20;

#[derive(Debug, Clone)]
pub struct OpenAiSettings {
    /// The API base (`http://127.0.0.1:8000/v1`) or the full `…/chat/completions` URL.
    pub url: String,
    pub model: String,
    /// Sent as `Authorization: Bearer …` when set.
    pub api_key: Option<String>,
    pub timeout: Duration,
}

impl OpenAiSettings {
    /// The endpoint URL: `<base>/chat/completions` unless the URL already names it.
    pub fn endpoint(&self) -> String {
        let base = self.url.trim_end_matches('/');
        if base.ends_with("/chat/completions") {
            base.to_string()
        } else {
            format!("{base}/chat/completions")
        }
    }
}

pub struct OpenAi {
    settings: OpenAiSettings,
    agent: ureq::Agent,
}

#[derive(Serialize)]
struct Message<'a> {
    role: &'a str,
    content: String,
}

#[derive(Serialize)]
struct ResponseFormat {
    r#type: &'static str,
}

#[derive(Serialize)]
struct ChatRequest<'a> {
    model: &'a str,
    messages: Vec<Message<'a>>,
    response_format: ResponseFormat,
    temperature: f64,
}

#[derive(Deserialize)]
struct ChatResponse {
    choices: Vec<Choice>,
}

#[derive(Deserialize)]
struct Choice {
    message: ReplyMessage,
}

#[derive(Deserialize)]
struct ReplyMessage {
    #[serde(default)]
    content: Option<String>,
}

fn system_prompt(cx: &StepContext) -> String {
    format!(
        "You triage intermittent GPU workload failures by choosing environment-variable \
         mitigations to test. Reply with exactly one JSON object and nothing else, with keys: \
         category (one of {}), hypothesis (string), next_mitigations (list of names taken only \
         from the candidates), diagnostics (list of names, may be empty), confidence (0 to 1), \
         stop (boolean), stop_reason (string or null). Never invent names. Candidates: {}.",
        CATEGORIES.join(", "),
        cx.candidates.join(", ")
    )
}

impl OpenAi {
    pub fn new(settings: OpenAiSettings) -> OpenAi {
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(settings.timeout))
            .http_status_as_error(false)
            .user_agent(concat!("aorta/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        OpenAi { settings, agent }
    }

    fn ask(&self, cx: &StepContext) -> Result<String, ProposeError> {
        let user = serde_json::to_string(cx)
            .map_err(|e| ProposeError::Transport(format!("cannot encode the request: {e}")))?;
        let body = ChatRequest {
            model: &self.settings.model,
            messages: vec![
                Message {
                    role: "system",
                    content: system_prompt(cx),
                },
                Message {
                    role: "user",
                    content: user,
                },
            ],
            response_format: ResponseFormat {
                r#type: "json_object",
            },
            temperature: 0.0,
        };
        let body = serde_json::to_vec(&body)
            .map_err(|e| ProposeError::Transport(format!("cannot encode the request: {e}")))?;
        let url = self.settings.endpoint();
        let mut req = self
            .agent
            .post(&url)
            .header("Content-Type", "application/json");
        if let Some(k) = &self.settings.api_key {
            req = req.header("Authorization", format!("Bearer {k}"));
        }
        let resp = req
            .send(&body[..])
            .map_err(|e| ProposeError::Transport(format!("POST {url}: {e}")))?;
        let status = resp.status().as_u16();
        if !(200..300).contains(&status) {
            return Err(ProposeError::Transport(format!(
                "POST {url}: HTTP {status}"
            )));
        }
        let mut text = Vec::new();
        resp.into_body()
            .into_reader()
            .take(MAX_REPLY_BYTES + 1)
            .read_to_end(&mut text)
            .map_err(|e| ProposeError::Transport(format!("POST {url}: reading the reply: {e}")))?;
        if text.len() as u64 > MAX_REPLY_BYTES {
            return Err(ProposeError::Transport(format!(
                "POST {url}: the reply is larger than {MAX_REPLY_BYTES} bytes"
            )));
        }
        Ok(String::from_utf8_lossy(&text).into_owned())
    }
}

/// A chat completion's text → a validated step. A reply that is not a chat completion, or
/// whose content is not one JSON object, is AORTA's "invalid reply": the agent stops.
pub fn parse_reply(body: &str, registry: &Registry) -> Result<AgentStep, ProposeError> {
    let invalid = |why: String| Ok(AgentStep::stop("unknown", &format!("invalid reply: {why}")));
    let resp: ChatResponse = match serde_json::from_str(body) {
        Ok(r) => r,
        Err(e) => return invalid(format!("not a chat completion ({e})")),
    };
    let Some(content) = resp
        .choices
        .into_iter()
        .next()
        .and_then(|c| c.message.content)
    else {
        return invalid("no message content".into());
    };
    if content.trim().is_empty() {
        return invalid("empty message content".into());
    }
    // serde would read a JSON array into the struct by position: only an object is a step.
    if !content.trim_start().starts_with('{') {
        return invalid("the content is not a JSON object".into());
    }
    let raw: RawStep = match serde_json::from_str(content.trim()) {
        Ok(r) => r,
        Err(e) => return invalid(format!("the content is not one JSON object ({e})")),
    };
    Ok(raw.validate(registry)?)
}

impl Proposer for OpenAi {
    fn backend(&self) -> &'static str {
        "openai"
    }

    fn step(&mut self, cx: &StepContext, registry: &Registry) -> Result<AgentStep, ProposeError> {
        let body = self.ask(cx)?;
        parse_reply(&body, registry)
    }
}
