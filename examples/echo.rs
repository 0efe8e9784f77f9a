//! A TCP echo server on hwsched's own sockets (`hwsched::net`): each
//! connection is a task that writes back what it reads. A socket's
//! readiness wakes its task on the worker that polled it, which runs it
//! (a poller batch stays local).
//!
//! ```text
//! cargo run --release --features io --example echo -- [--addr 127.0.0.1:7000] [--secs N] [--workers N]
//! nc 127.0.0.1 7000
//! ```
//!
//! Stops on Ctrl-C (`hwsched::signal::ctrl_c`) or after `--secs`;
//! connections still open are dropped with the runtime (each task once),
//! and the driver's counters are printed.

use std::net::SocketAddr;
use std::time::Duration;

use futures_lite::{future, AsyncReadExt, AsyncWriteExt};
use hwsched::net::TcpStream;

/// Copies what the client sends back to it until it closes.
async fn echo(mut stream: TcpStream) -> std::io::Result<u64> {
    let mut buf = vec![0u8; 16 << 10];
    let mut total = 0u64;
    loop {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Ok(total);
        }
        stream.write_all(&buf[..n]).await?;
        total += n as u64;
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut addr: SocketAddr = "127.0.0.1:7000".parse()?;
    let mut secs: Option<u64> = None;
    let mut workers: Option<usize> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--addr" => addr = val()?.parse()?,
            "--secs" => secs = Some(val()?.parse()?),
            "--workers" => workers = Some(val()?.parse()?),
            other => return Err(format!("unknown argument {other:?}").into()),
        }
    }
    let mut b = hwsched::Runtime::builder();
    if let Some(n) = workers {
        b = b.worker_threads(n);
    }
    let rt = b.build()?;
    let served = rt.block_on(async move {
        let listener = hwsched::net::TcpListener::bind(addr).await?;
        println!("echo: listening on {}", listener.local_addr()?);
        let ctrl_c = hwsched::signal::ctrl_c();
        let deadline = async {
            match secs {
                Some(s) => hwsched::time::sleep(Duration::from_secs(s)).await,
                None => std::future::pending().await,
            }
        };
        let mut stop = std::pin::pin!(future::or(deadline, async {
            let _ = ctrl_c.await;
        }));
        let mut served = 0u64;
        loop {
            let next = future::or(async { Some(listener.accept().await) }, async {
                (&mut stop).await;
                None
            });
            match next.await {
                Some(Ok((stream, _peer))) => {
                    served += 1;
                    // Detached: the task runs until its client closes, or
                    // until the runtime is dropped.
                    drop(hwsched::spawn(async move {
                        if let Err(e) = echo(stream).await {
                            eprintln!("echo: connection: {e}");
                        }
                    }));
                }
                Some(Err(e)) => eprintln!("echo: accept: {e}"),
                None => break,
            }
        }
        Ok::<u64, std::io::Error>(served)
    })?;
    let stats = rt.stats();
    drop(rt);
    let t = stats.total();
    println!(
        "echo: {served} connections; task wakes: {} from the I/O driver on a worker, {} from \
         tasks, {} from other threads",
        t.wakes_by_driver, t.wakes_by_task, stats.external.wakes_foreign
    );
    Ok(())
}
