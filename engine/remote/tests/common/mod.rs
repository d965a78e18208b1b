//! A plain-HTTP object server on loopback: `PUT` stores the body under the request path,
//! `GET`/`HEAD` answer it or 404, as nginx's WebDAV module does for the http:// back-end.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

pub type Objects = Arc<Mutex<BTreeMap<String, Vec<u8>>>>;

/// Starts the server; returns its base URL and its objects (by request path).
pub fn object_server() -> (String, Objects) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let objects: Objects = Arc::default();
    let store = objects.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let store = store.clone();
            std::thread::spawn(move || serve(conn, &store));
        }
    });
    (base, objects)
}

fn serve(conn: TcpStream, objects: &Objects) {
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut out = conn;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let (method, path) = (
            parts.next().unwrap_or("").to_owned(),
            parts.next().unwrap_or("").to_owned(),
        );
        let mut len = 0usize;
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    len = v.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0u8; len];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let found = objects.lock().unwrap().get(&path).cloned();
        let resp: Vec<u8> = match (method.as_str(), found) {
            ("PUT", _) => {
                objects.lock().unwrap().insert(path, body);
                b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n".to_vec()
            }
            ("GET", Some(b)) => [
                format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", b.len()).into_bytes(),
                b,
            ]
            .concat(),
            ("HEAD", Some(b)) => {
                format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", b.len()).into_bytes()
            }
            ("GET" | "HEAD", None) => {
                b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n".to_vec()
            }
            _ => b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n".to_vec(),
        };
        if out.write_all(&resp).is_err() {
            return;
        }
    }
}
