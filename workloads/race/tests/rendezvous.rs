//! The rendezvous over loopback: the id reaches every rank, a failing rank aborts everyone with
//! its message, results come back to rank 0, strangers and duplicates are refused.

use std::thread;
use std::time::Duration;

use aorta_race::rendezvous::{free_port, Client, DistEnv, Server};

const T: Duration = Duration::from_secs(10);

fn addr() -> String {
    format!("127.0.0.1:{}", free_port().unwrap())
}

#[test]
fn id_broadcast_and_result_gather() {
    let a = addr();
    let listener = Server::bind(&a).unwrap();
    let ranks: Vec<_> = (1..4u32)
        .map(|r| {
            let a = a.clone();
            thread::spawn(move || {
                let mut c = Client::join(&a, r, 4, T).unwrap();
                let id = c.barrier(Ok(())).unwrap();
                c.send_result(format!("{{\"rank\": {r}, \"id0\": {}}}", id[0]).as_bytes())
                    .unwrap();
            })
        })
        .collect();
    let mut s = Server::accept(listener, 4, T).unwrap();
    let mut id = [0u8; 128];
    id[0] = 42;
    id[127] = 7;
    assert_eq!(s.barrier(Ok(id)).unwrap(), id);
    let got = s.gather(T);
    ranks.into_iter().for_each(|h| h.join().unwrap());
    assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), vec![1, 2, 3]);
    for (r, b) in got {
        let v: serde_json::Value = serde_json::from_slice(&b.unwrap()).unwrap();
        assert_eq!(
            (v["rank"].as_u64(), v["id0"].as_u64()),
            (Some(r as u64), Some(42))
        );
    }
}

#[test]
fn a_failing_rank_aborts_all_with_its_message() {
    let a = addr();
    let listener = Server::bind(&a).unwrap();
    let hs: Vec<_> = (1..3u32)
        .map(|r| {
            let a = a.clone();
            thread::spawn(move || {
                let mut c = Client::join(&a, r, 3, T).unwrap();
                c.barrier(if r == 2 {
                    Err("no GPU 2".into())
                } else {
                    Ok(())
                })
            })
        })
        .collect();
    let mut s = Server::accept(listener, 3, T).unwrap();
    let e = s.barrier(Ok([1; 128])).unwrap_err();
    assert_eq!(e, "rank 2: no GPU 2");
    for h in hs {
        assert_eq!(h.join().unwrap().unwrap_err(), "rank 2: no GPU 2");
    }
}

#[test]
fn strangers_are_ignored_and_wrong_world_sizes_refused() {
    let a = addr();
    let listener = Server::bind(&a).unwrap();
    let a2 = a.clone();
    let h = thread::spawn(move || {
        use std::io::Write;
        let mut s = std::net::TcpStream::connect(&a2).unwrap();
        s.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
        drop(s);
        Client::join(&a2, 1, 5, T).unwrap()
    });
    let e = Server::accept(listener, 2, T).err().unwrap();
    assert!(e.contains("WORLD_SIZE=5"), "{e}");
    drop(h.join().unwrap());
}

#[test]
fn join_gives_up_after_its_timeout() {
    let a = addr();
    let t = std::time::Instant::now();
    let e = Client::join(&a, 1, 2, Duration::from_millis(300))
        .err()
        .unwrap();
    assert!(e.contains("cannot reach rank 0"), "{e}");
    assert!(t.elapsed() < Duration::from_secs(5));
}

#[test]
fn torchrun_env_is_read_and_checked() {
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |k: &str| pairs.iter().find(|p| p.0 == k).map(|p| p.1.to_string())
    };
    assert_eq!(DistEnv::from_env(env(&[])).unwrap(), None);
    let d = DistEnv::from_env(env(&[
        ("RANK", "1"),
        ("WORLD_SIZE", "2"),
        ("MASTER_ADDR", "h"),
        ("MASTER_PORT", "29500"),
    ]))
    .unwrap()
    .unwrap();
    assert_eq!(
        (d.rank, d.world, d.local_rank, d.master.as_str()),
        (1, 2, 1, "h:29500")
    );
    assert!(DistEnv::from_env(env(&[("RANK", "0")]))
        .unwrap_err()
        .contains("WORLD_SIZE"));
    assert!(DistEnv::from_env(env(&[
        ("RANK", "0"),
        ("WORLD_SIZE", "1"),
        ("MASTER_ADDR", "h"),
        ("MASTER_PORT", "0")
    ]))
    .is_err());
    assert!(
        DistEnv::from_env(env(&[("RANK", "a"), ("WORLD_SIZE", "1")]))
            .unwrap_err()
            .contains("RANK")
    );
}
