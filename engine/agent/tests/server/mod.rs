//! A real HTTP/1.1 server on loopback that answers chat-completion POSTs with scripted
//! replies and records what it was sent: enough of the wire format to test the `openai`
//! proposer (and the CLI) without a model.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One scripted reply.
#[derive(Clone)]
pub struct Reply {
    pub status: u16,
    pub body: String,
    /// Wait this long before answering (timeouts).
    pub delay: Duration,
}

impl Reply {
    /// A 200 chat completion whose message content is `content`.
    pub fn content(content: &str) -> Reply {
        let body = serde_json::json!({
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}]
        });
        Reply::raw(200, &body.to_string())
    }

    pub fn raw(status: u16, body: &str) -> Reply {
        Reply {
            status,
            body: body.into(),
            delay: Duration::ZERO,
        }
    }
}

/// A request as received (each test reads the parts it checks).
#[allow(dead_code)]
#[derive(Debug, Clone)]
pub struct Request {
    pub path: String,
    pub authorization: Option<String>,
    pub body: serde_json::Value,
}

pub struct Server {
    pub url: String,
    pub requests: Arc<Mutex<Vec<Request>>>,
}

/// Serves `replies` in order (the last one repeats) on 127.0.0.1, in a background thread.
pub fn serve(replies: Vec<Reply>) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let requests = Arc::new(Mutex::new(Vec::new()));
    let seen = requests.clone();
    std::thread::spawn(move || {
        let mut n = 0;
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let reply = replies[n.min(replies.len() - 1)].clone();
            n += 1;
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
            let (mut len, mut auth) = (0usize, None);
            loop {
                let mut h = String::new();
                if reader.read_line(&mut h).unwrap() == 0 || h == "\r\n" {
                    break;
                }
                let (k, v) = h.split_once(':').unwrap_or((&h, ""));
                match k.to_ascii_lowercase().as_str() {
                    "content-length" => len = v.trim().parse().unwrap(),
                    "authorization" => auth = Some(v.trim().to_string()),
                    _ => {}
                }
            }
            let mut body = vec![0; len];
            reader.read_exact(&mut body).unwrap();
            seen.lock().unwrap().push(Request {
                path,
                authorization: auth,
                body: serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null),
            });
            std::thread::sleep(reply.delay);
            let head = format!(
                "HTTP/1.1 {} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                reply.status,
                reply.body.len()
            );
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(reply.body.as_bytes());
        }
    });
    Server { url, requests }
}
