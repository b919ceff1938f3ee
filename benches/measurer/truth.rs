//! The timing-truth server: an OpenAI-compatible streaming endpoint written
//! straight on TCP (HTTP/1.1, chunked), so that the instants it records are
//! the instants its bytes were handed to the kernel, with no framework
//! between. It runs in a child process (`measurer serve-truth ...`) so that
//! its CPU never lands in the client's accounting.
//!
//! For each request it records, on its own monotonic clock, when the last
//! byte of the request reached its socket (the kernel's receive timestamp,
//! `SO_TIMESTAMPNS`, so that the server's own queueing before it reads is not
//! hidden from the truth) and when each content chunk's write returned (on
//! loopback the bytes are then already in the client's receive queue).
//! `GET /truth` returns and forgets those records, keyed by the request's
//! `user` field where the client set one to a unique id. A request without
//! one (a sweep's own bodies carry none) is keyed `#N`, N being the serial
//! number the server gives every request it answers, which it also reports
//! as the answer's `usage.prompt_tokens`: a sweep keeps that field in each
//! sample, so a sample names the server's record of the request it measured.
//! Each record also says on which connection the request came (connections
//! are numbered as accepted), whether it was the connection's first, and
//! when it arrived on the monotonic clock, which the client process reads
//! too. The report tells how many connections were accepted since the last
//! call, and when: a client that opens more than it keeps requests in flight
//! lost its pooled connections.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncWriteExt, Interest};
use tokio::net::{TcpListener, TcpStream};

use crate::os;

/// How content chunks are spaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pace {
    /// First content chunk `ttft` after the request, then one every `gap`,
    /// on absolute deadlines so that a late timer delays one chunk only.
    Paced { ttft: Duration, gap: Duration },
    /// No delay: one write per chunk, yielding between chunks so that every
    /// stream gets its turn, as a batching server writes one chunk per
    /// stream per step.
    Saturate,
}

/// The server's own view of one request: content chunk write instants,
/// measured from when the request reached the server's socket.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Truth {
    /// Offset of each content chunk's write, in nanoseconds.
    pub writes_ns: Vec<u64>,
    /// From the request reaching the socket to the server reading it: the
    /// server's own queueing, which a server timing from its read would miss.
    pub read_delay_ns: u64,
    /// Whether the request came on a connection opened for it.
    #[serde(default)]
    pub fresh_connection: bool,
    /// The connection it came on, numbered from 1 as accepted.
    #[serde(default)]
    pub connection: u64,
    /// When it reached the socket, on the monotonic clock (`os::monotonic_ns`).
    #[serde(default)]
    pub arrived_ns: u64,
}

impl Truth {
    /// Request read to first content chunk written.
    pub fn ttft(&self) -> Option<Duration> {
        self.writes_ns.first().map(|&n| Duration::from_nanos(n))
    }

    /// Request read to last content chunk written.
    pub fn latency(&self) -> Option<Duration> {
        self.writes_ns.last().map(|&n| Duration::from_nanos(n))
    }

    /// When its last content chunk was written, on the monotonic clock.
    pub fn ended_ns(&self) -> u64 {
        self.arrived_ns + self.writes_ns.last().copied().unwrap_or(0)
    }

    /// Gaps between consecutive content chunk writes.
    pub fn gaps(&self) -> impl Iterator<Item = Duration> + '_ {
        self.writes_ns
            .windows(2)
            .map(|w| Duration::from_nanos(w[1] - w[0]))
    }
}

/// What `GET /truth` returns.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Report {
    /// Connections accepted since the previous report.
    pub connections: u64,
    /// When each of them was accepted, on the monotonic clock.
    #[serde(default)]
    pub accepted_ns: Vec<u64>,
    /// Truth per request id.
    pub requests: HashMap<String, Truth>,
}

/// What every connection shares.
struct Shared {
    /// The records not yet handed over.
    report: Mutex<Report>,
    /// Serial number of the last request answered.
    requests: AtomicU64,
}

type Records = Arc<Shared>;

/// Serves until killed; prints `listening ADDR` on stdout once bound.
pub async fn serve(pace: Pace) -> std::io::Result<()> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    println!("listening {}", listener.local_addr()?);
    let records: Records = Arc::new(Shared {
        report: Mutex::default(),
        requests: AtomicU64::new(0),
    });
    let mut accepted = 0u64;
    loop {
        let (sock, _) = listener.accept().await?;
        accepted += 1;
        {
            let mut report = records.report.lock().unwrap();
            report.connections += 1;
            report.accepted_ns.push(os::monotonic_ns());
        }
        let records = records.clone();
        tokio::spawn(async move {
            let _ = connection(sock, accepted, pace, records).await;
        });
    }
}

async fn connection(
    mut sock: TcpStream,
    number: u64,
    pace: Pace,
    records: Records,
) -> std::io::Result<()> {
    sock.set_nodelay(true)?;
    set_timestamps(sock.as_raw_fd())?;
    let mut buf: Vec<u8> = Vec::with_capacity(8192);
    let mut arrived = None;
    let mut fresh = true;
    loop {
        let head_end = loop {
            if let Some(p) = find(&buf, b"\r\n\r\n") {
                break p + 4;
            }
            match read_stamped(&sock, &mut buf).await? {
                (0, _) => return Ok(()),
                (_, stamp) => arrived = stamp,
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
        let length = head
            .lines()
            .filter_map(|l| l.split_once(':'))
            .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
            .and_then(|(_, v)| v.trim().parse::<usize>().ok())
            .unwrap_or(0);
        while buf.len() < head_end + length {
            match read_stamped(&sock, &mut buf).await? {
                (0, _) => return Ok(()),
                (_, stamp) => arrived = stamp,
            }
        }
        // The request is complete; its zero is when its last byte arrived.
        let read = Instant::now();
        let received = arrived.take().filter(|&a| a <= read).unwrap_or(read);
        let body = buf[head_end..head_end + length].to_vec();
        buf.drain(..head_end + length);
        let path = head.split_whitespace().nth(1).unwrap_or("");
        if head.starts_with("GET") && path == "/truth" {
            let all = std::mem::take(&mut *records.report.lock().unwrap());
            let json = serde_json::to_vec(&all).unwrap_or_default();
            let mut out = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                json.len()
            )
            .into_bytes();
            out.extend_from_slice(&json);
            sock.write_all(&out).await?;
        } else if head.starts_with("POST") && path.ends_with("/chat/completions") {
            let serial = records.requests.fetch_add(1, Ordering::Relaxed) + 1;
            let (id, mut truth) = stream(&mut sock, &body, pace, received, serial).await?;
            truth.read_delay_ns = (read - received).as_nanos() as u64;
            truth.fresh_connection = std::mem::take(&mut fresh);
            truth.connection = number;
            truth.arrived_ns = os::monotonic_ns() - received.elapsed().as_nanos() as u64;
            records.report.lock().unwrap().requests.insert(id, truth);
        } else {
            sock.write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
                .await?;
        }
    }
}

/// Streams one chat completion, request number `serial` (reported as its
/// `usage.prompt_tokens`), and returns the request's id and its truth.
async fn stream(
    sock: &mut TcpStream,
    body: &[u8],
    pace: Pace,
    received: Instant,
    serial: u64,
) -> std::io::Result<(String, Truth)> {
    let request: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    let id = match request["user"].as_str() {
        Some(user) => user.to_string(),
        None => serial_key(serial),
    };
    let tokens = request["max_completion_tokens"]
        .as_u64()
        .or_else(|| request["max_tokens"].as_u64())
        .unwrap_or(16)
        .max(1);
    let usage = request["stream_options"]["include_usage"] == true;
    let model = request["model"].as_str().unwrap_or("m");
    let tail = if usage { ",\"usage\":null}" } else { "}" };
    // The chunk id carries the request id too, which helps when reading a capture.
    let head = format!(
        "{{\"id\":{},\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":{},\"choices\":[",
        serde_json::json!(id),
        serde_json::json!(model)
    );

    let mut out = Vec::with_capacity(512);
    out.extend_from_slice(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n",
    );
    frame(&mut out, &format!("{head}{{\"index\":0,\"delta\":{{\"role\":\"assistant\",\"content\":\"\"}},\"logprobs\":null,\"finish_reason\":null}}]{tail}"));
    sock.write_all(&out).await?;

    let mut truth = Truth {
        writes_ns: Vec::with_capacity(tokens as usize),
        ..Truth::default()
    };
    for i in 0..tokens {
        match pace {
            Pace::Paced { ttft, gap } => {
                let deadline = received + ttft + gap * i as u32;
                tokio::time::sleep_until(deadline.into()).await;
            }
            Pace::Saturate => tokio::task::yield_now().await,
        }
        let finish = if i + 1 == tokens {
            "\"length\""
        } else {
            "null"
        };
        out.clear();
        frame(
            &mut out,
            &format!("{head}{{\"index\":0,\"delta\":{{\"content\":\" tok\"}},\"logprobs\":null,\"finish_reason\":{finish}}}]{tail}"),
        );
        sock.write_all(&out).await?;
        truth.writes_ns.push(received.elapsed().as_nanos() as u64);
    }
    out.clear();
    if usage {
        frame(
            &mut out,
            &format!("{head}],\"usage\":{{\"prompt_tokens\":{serial},\"completion_tokens\":{tokens},\"total_tokens\":{}}}}}", tokens + serial),
        );
    }
    out.extend_from_slice(b"e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n");
    sock.write_all(&out).await?;
    Ok((id, truth))
}

/// The key of the record of request number `serial` sent without a `user`.
pub fn serial_key(serial: u64) -> String {
    format!("#{serial}")
}

/// Appends one SSE event as one HTTP chunk.
fn frame(out: &mut Vec<u8>, data: &str) {
    let event_len = "data: ".len() + data.len() + 2;
    out.extend_from_slice(format!("{event_len:x}\r\ndata: ").as_bytes());
    out.extend_from_slice(data.as_bytes());
    out.extend_from_slice(b"\n\n\r\n");
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Asks the kernel to timestamp every received segment (`SO_TIMESTAMPNS`).
fn set_timestamps(fd: RawFd) -> io::Result<()> {
    let on: libc::c_int = 1;
    // SAFETY: a valid socket and an int option of the right size.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Reads what is there into `buf`; returns the byte count and, on the
/// monotonic clock, when the last segment read had reached the socket.
async fn read_stamped(sock: &TcpStream, buf: &mut Vec<u8>) -> io::Result<(usize, Option<Instant>)> {
    buf.reserve(4096);
    loop {
        sock.readable().await?;
        match sock.try_io(Interest::READABLE, || recv_stamped(sock.as_raw_fd(), buf)) {
            Ok(r) => return Ok(r),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        }
    }
}

fn recv_stamped(fd: RawFd, buf: &mut Vec<u8>) -> io::Result<(usize, Option<Instant>)> {
    let spare = buf.spare_capacity_mut();
    let mut iov = libc::iovec {
        iov_base: spare.as_mut_ptr().cast(),
        iov_len: spare.len(),
    };
    // u64s keep the control buffer aligned for cmsghdr.
    let mut control = [0u64; 16];
    // SAFETY: msghdr is plain data; every pointer set below outlives the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control);
    // SAFETY: the iovec points into buf's spare capacity, of the length given.
    let n = unsafe { libc::recvmsg(fd, &mut msg, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: recvmsg initialised n bytes of the spare capacity.
    unsafe { buf.set_len(buf.len() + n as usize) };
    let (mono_now, real_now) = (Instant::now(), realtime());
    let mut stamp = None;
    // SAFETY: walking the control messages the kernel wrote into `control`.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_TIMESTAMPNS
            {
                let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast());
                stamp = Some(ts);
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    // The kernel stamps on the realtime clock; its age carries over to the
    // monotonic one (both tick at the same rate over milliseconds).
    let arrived = stamp.map(|ts| {
        let age = real_now.saturating_sub(nanos(ts));
        mono_now - Duration::from_nanos(age)
    });
    Ok((n as usize, arrived))
}

fn nanos(ts: libc::timespec) -> u64 {
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn realtime() -> u64 {
    // SAFETY: clock_gettime writes the timespec we hand it.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    nanos(ts)
}
