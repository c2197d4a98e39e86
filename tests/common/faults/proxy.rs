//! A per-request round-robin HTTP proxy on loopback (tokio): each client
//! connection (the workload sends one request per connection) goes to the
//! next node, and its response, an SSE stream included, comes back as it is
//! written. A node that refuses the connection closes the client's at once
//! (the client sees a cut connection: an unknown outcome). Stopped on drop.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};

/// Entries of the port-to-node log kept at most (older ones are dropped).
const LOG_LIMIT: usize = 100_000;

/// The proxy; stops (its runtime and every piped connection) on drop.
pub struct Proxy {
    /// Its address.
    pub addr: SocketAddr,
    runtime: Option<tokio::runtime::Runtime>,
    /// The node each client connection went to, by the client's local port.
    routes: Arc<Mutex<HashMap<u16, usize>>>,
}

impl Proxy {
    /// Starts a proxy in front of `nodes`.
    pub fn start(nodes: Vec<SocketAddr>) -> Proxy {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("the proxy's runtime");
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").expect("the proxy binds");
        std_listener.set_nonblocking(true).expect("non-blocking");
        let addr = std_listener.local_addr().expect("the proxy's address");
        let routes: Arc<Mutex<HashMap<u16, usize>>> = Arc::default();
        let next = Arc::new(AtomicUsize::new(0));
        let r = routes.clone();
        runtime.spawn(async move {
            let Ok(listener) = TcpListener::from_std(std_listener) else {
                return;
            };
            loop {
                let Ok((mut client, peer)) = listener.accept().await else {
                    continue;
                };
                let i = next.fetch_add(1, Ordering::SeqCst) % nodes.len();
                {
                    let mut routes = r.lock().expect("routes lock");
                    if routes.len() >= LOG_LIMIT {
                        routes.clear();
                    }
                    routes.insert(peer.port(), i);
                }
                let upstream = nodes[i];
                tokio::spawn(async move {
                    let connected =
                        tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(upstream))
                            .await;
                    if let Ok(Ok(mut up)) = connected {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut up).await;
                    }
                });
            }
        });
        Proxy {
            addr,
            runtime: Some(runtime),
            routes,
        }
    }

    /// A handle for the clients: the address and the route log.
    pub fn handle(&self) -> ProxyHandle {
        ProxyHandle {
            addr: self.addr,
            routes: self.routes.clone(),
        }
    }
}

/// What a client needs of the proxy (cheap to clone, shared by threads).
#[derive(Clone)]
pub struct ProxyHandle {
    /// The proxy's address.
    pub addr: SocketAddr,
    routes: Arc<Mutex<HashMap<u16, usize>>>,
}

impl ProxyHandle {
    /// The node the connection from local port `port` went to.
    pub fn node_of(&self, port: u16) -> Option<usize> {
        self.routes.lock().expect("routes lock").get(&port).copied()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}
