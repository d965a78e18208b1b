//! The rendezvous: rank 0 listens on MASTER_ADDR:MASTER_PORT, every other rank connects (and
//! retries until rank 0 is up), a status barrier lets rank 0 hand out the NCCL unique id or one
//! clear abort message, and at the end the ranks send their results to rank 0. Frames are
//! `tag u8, len u32 LE, payload`; every read and write has a deadline, so a missing rank is an
//! error after the timeout, never a hang.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

const MAGIC: &[u8; 8] = b"AORTARC1";
const HELLO: u8 = 1;
const OK: u8 = 2;
const FAIL: u8 = 3;
const GO: u8 = 4;
const ABORT: u8 = 5;
const RESULT: u8 = 6;
const MAX_FRAME: usize = 64 << 20;

/// The torchrun-style environment of one rank.
#[derive(Clone, Debug, PartialEq)]
pub struct DistEnv {
    pub rank: u32,
    pub world: u32,
    pub local_rank: u32,
    pub master: String,
}

impl DistEnv {
    /// From RANK, WORLD_SIZE, LOCAL_RANK (default RANK), MASTER_ADDR, MASTER_PORT; `None` when
    /// RANK is unset (not launched as a rank).
    pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Result<Option<DistEnv>, String> {
        let Some(rank) = get("RANK") else {
            return Ok(None);
        };
        let num = |k: &str, v: Option<String>| -> Result<u32, String> {
            let v = v.ok_or_else(|| format!("RANK is set but {k} is not (torchrun sets RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)"))?;
            v.trim()
                .parse()
                .map_err(|_| format!("{k}={v:?} is not a non-negative integer"))
        };
        let rank = num("RANK", Some(rank))?;
        let world = num("WORLD_SIZE", get("WORLD_SIZE"))?;
        let local_rank = match get("LOCAL_RANK") {
            Some(v) => num("LOCAL_RANK", Some(v))?,
            None => rank,
        };
        let port = num("MASTER_PORT", get("MASTER_PORT"))?;
        let addr = get("MASTER_ADDR").ok_or("RANK is set but MASTER_ADDR is not")?;
        if world == 0 || rank >= world {
            return Err(format!("RANK={rank} is outside WORLD_SIZE={world}"));
        }
        if port == 0 || port > 65535 {
            return Err(format!("MASTER_PORT={port} is not a TCP port"));
        }
        Ok(Some(DistEnv {
            rank,
            world,
            local_rank,
            master: format!("{addr}:{port}"),
        }))
    }
}

fn resolve(addr: &str) -> Result<SocketAddr, String> {
    addr.to_socket_addrs()
        .map_err(|e| format!("cannot resolve MASTER_ADDR:MASTER_PORT {addr}: {e}"))?
        .next()
        .ok_or_else(|| format!("{addr} resolves to no address"))
}

fn io(what: &str, e: std::io::Error) -> String {
    format!("rendezvous: {what}: {e}")
}

fn send(s: &mut TcpStream, tag: u8, payload: &[u8]) -> Result<(), String> {
    let mut f = Vec::with_capacity(5 + payload.len());
    f.push(tag);
    f.extend((payload.len() as u32).to_le_bytes());
    f.extend(payload);
    s.write_all(&f).map_err(|e| io("send", e))
}

fn recv(s: &mut TcpStream, deadline: Instant) -> Result<(u8, Vec<u8>), String> {
    let left = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(1));
    s.set_read_timeout(Some(left))
        .map_err(|e| io("set timeout", e))?;
    let mut head = [0u8; 5];
    s.read_exact(&mut head)
        .map_err(|e| io("receive (peer gone or timed out)", e))?;
    let len = u32::from_le_bytes([head[1], head[2], head[3], head[4]]) as usize;
    if len > MAX_FRAME {
        return Err(format!(
            "rendezvous: frame of {len} bytes (not an aorta peer?)"
        ));
    }
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).map_err(|e| io("receive", e))?;
    Ok((head[0], body))
}

/// Rank 0's side.
pub struct Server {
    peers: Vec<(u32, TcpStream)>,
    timeout: Duration,
}

impl Server {
    pub fn bind(addr: &str) -> Result<TcpListener, String> {
        let a = resolve(addr)?;
        TcpListener::bind(a).map_err(|e| io(&format!("bind {a} (is MASTER_PORT free?)"), e))
    }

    /// Accept the other `world - 1` ranks.
    pub fn accept(listener: TcpListener, world: u32, timeout: Duration) -> Result<Server, String> {
        let deadline = Instant::now() + timeout;
        listener
            .set_nonblocking(true)
            .map_err(|e| io("listen", e))?;
        let mut peers: Vec<(u32, TcpStream)> = Vec::new();
        while peers.len() + 1 < world as usize {
            match listener.accept() {
                Ok((mut s, from)) => {
                    s.set_nonblocking(false).map_err(|e| io("accept", e))?;
                    s.set_write_timeout(Some(timeout))
                        .map_err(|e| io("accept", e))?;
                    let hello = recv(
                        &mut s,
                        deadline.min(Instant::now() + Duration::from_secs(10)),
                    );
                    match hello {
                        Ok((HELLO, b)) if b.len() == 16 && &b[..8] == MAGIC => {
                            let rank = u32::from_le_bytes([b[8], b[9], b[10], b[11]]);
                            let w = u32::from_le_bytes([b[12], b[13], b[14], b[15]]);
                            if w != world {
                                return Err(format!("rendezvous: rank {rank} says WORLD_SIZE={w}, rank 0 has {world}"));
                            }
                            if rank == 0 || rank >= world || peers.iter().any(|(r, _)| *r == rank) {
                                return Err(format!("rendezvous: rank {rank} joined twice or is out of range (WORLD_SIZE={world})"));
                            }
                            peers.push((rank, s));
                        }
                        _ => eprintln!("race: rendezvous: ignoring a connection from {from} that is not an aorta rank"),
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if Instant::now() >= deadline {
                        let mut have: Vec<u32> = peers.iter().map(|p| p.0).collect();
                        have.sort_unstable();
                        return Err(format!(
                            "rendezvous: only {} of {world} ranks joined within {} s (joined: 0 {have:?})",
                            peers.len() + 1,
                            timeout.as_secs()
                        ));
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => return Err(io("accept", e)),
            }
        }
        peers.sort_by_key(|p| p.0);
        Ok(Server { peers, timeout })
    }

    /// The barrier: collect every rank's setup status, then send the id to all (or, when any
    /// rank failed, the first failure to all). Returns what every rank was told.
    pub fn barrier(&mut self, own: Result<[u8; 128], String>) -> Result<[u8; 128], String> {
        let deadline = Instant::now() + self.timeout;
        let mut failure = own.as_ref().err().map(|e| format!("rank 0: {e}"));
        for (rank, s) in &mut self.peers {
            match recv(s, deadline) {
                Ok((OK, _)) => {}
                Ok((FAIL, m)) => {
                    failure.get_or_insert(format!("rank {rank}: {}", String::from_utf8_lossy(&m)));
                }
                Ok((t, _)) => {
                    return Err(format!(
                        "rendezvous: rank {rank} sent frame {t} at the barrier"
                    ))
                }
                Err(e) => {
                    failure.get_or_insert(format!("rank {rank}: {e}"));
                }
            }
        }
        let (tag, payload) = match (&failure, &own) {
            (None, Ok(id)) => (GO, id.to_vec()),
            _ => (ABORT, failure.clone().unwrap_or_default().into_bytes()),
        };
        for (_, s) in &mut self.peers {
            let _ = send(s, tag, &payload);
        }
        match failure {
            None => own,
            Some(f) => Err(f),
        }
    }

    /// Every other rank's result (in rank order); a rank that sent nothing in time is an `Err`.
    pub fn gather(&mut self, timeout: Duration) -> Vec<(u32, Result<Vec<u8>, String>)> {
        let deadline = Instant::now() + timeout;
        self.peers
            .iter_mut()
            .map(|(rank, s)| {
                let r = match recv(s, deadline) {
                    Ok((RESULT, b)) => Ok(b),
                    Ok((t, _)) => Err(format!("sent frame {t} instead of its result")),
                    Err(e) => Err(e),
                };
                (*rank, r)
            })
            .collect()
    }
}

/// A rank's side (rank ≥ 1).
pub struct Client {
    stream: TcpStream,
    timeout: Duration,
}

impl Client {
    /// Connect to rank 0, retrying until it listens or the timeout passes.
    pub fn join(addr: &str, rank: u32, world: u32, timeout: Duration) -> Result<Client, String> {
        let deadline = Instant::now() + timeout;
        let a = resolve(addr)?;
        let mut stream = loop {
            match TcpStream::connect_timeout(&a, Duration::from_secs(2)) {
                Ok(s) => break s,
                Err(e) if Instant::now() < deadline => {
                    let _ = e;
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) => {
                    return Err(io(
                        &format!(
                            "rank {rank} cannot reach rank 0 at {a} within {} s",
                            timeout.as_secs()
                        ),
                        e,
                    ))
                }
            }
        };
        stream
            .set_write_timeout(Some(timeout))
            .map_err(|e| io("connect", e))?;
        let mut hello = MAGIC.to_vec();
        hello.extend(rank.to_le_bytes());
        hello.extend(world.to_le_bytes());
        send(&mut stream, HELLO, &hello)?;
        Ok(Client { stream, timeout })
    }

    /// Report this rank's setup status; returns the id, or why the run is aborted.
    pub fn barrier(&mut self, own: Result<(), String>) -> Result<[u8; 128], String> {
        match &own {
            Ok(()) => send(&mut self.stream, OK, &[])?,
            Err(e) => send(&mut self.stream, FAIL, e.as_bytes())?,
        }
        // Rank 0 may be slow to set up (NCCL, NVRTC): wait a full timeout for its answer.
        let (tag, body) = recv(&mut self.stream, Instant::now() + self.timeout)?;
        match tag {
            GO if body.len() == 128 => {
                let mut id = [0u8; 128];
                id.copy_from_slice(&body);
                own.map(|_| id)
            }
            ABORT => Err(String::from_utf8_lossy(&body).into_owned()),
            t => Err(format!("rendezvous: unexpected frame {t} from rank 0")),
        }
    }

    pub fn send_result(&mut self, json: &[u8]) -> Result<(), String> {
        send(&mut self.stream, RESULT, json)
    }
}

/// A free TCP port on the loopback interface (for `--nproc`).
pub fn free_port() -> Result<u16, String> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| io("pick a port", e))?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| io("pick a port", e))
}
