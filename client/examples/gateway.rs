//! A small HTTP gateway in front of an origin, rate limited by tally.
//!
//! ```text
//! cargo run --release -p tally-server &                      # the counter store
//! cargo run --example gateway -p tally-client --features tower -- \
//!     --listen 127.0.0.1:8080 --origin 127.0.0.1:9000 --server redis://127.0.0.1:6379
//! curl -i -H 'x-user: u_99182' http://127.0.0.1:8080/search
//! ```
//!
//! The identity is the `x-user` header (requests without it are counted by
//! client IP); the endpoint is `METHOD /path`. Rules: `--rules FILE` (TOML),
//! or built in: 60 requests a minute per user, 10 a minute on `GET /search`.
//! Without `--origin`, the gateway answers 200 itself.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tally_client::tower::{RateLimitLayer, RequestKey};
use tally_client::{Identity, Limiter, Mode};
use tower::{Layer, Service};

const DEFAULT_RULES: &str = r#"
[tiers.free]
global = { limit = 60, window_seconds = 60 }
endpoints."GET /search" = { limit = 10, window_seconds = 60 }
"#;

struct Args {
    listen: SocketAddr,
    origin: Option<String>,
    server: String,
    rules: Option<String>,
    cached: bool,
}

fn parse_args() -> Args {
    let mut args = Args {
        listen: "127.0.0.1:8080".parse().unwrap(),
        origin: None,
        server: "redis://127.0.0.1:6379".to_string(),
        rules: None,
        cached: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--listen" => args.listen = value().parse().expect("--listen host:port"),
            "--origin" => args.origin = Some(value()),
            "--server" => args.server = value(),
            "--rules" => args.rules = Some(value()),
            "--cached" => args.cached = true,
            other => panic!("unknown flag {other} (--listen --origin --server --rules --cached)"),
        }
    }
    args
}

/// The request as the layer sees it, with the peer address attached.
type GatewayRequest = Request<Full<Bytes>>;

fn classify(request: &GatewayRequest) -> Option<RequestKey> {
    let identity = match request
        .headers()
        .get("x-user")
        .and_then(|v| v.to_str().ok())
    {
        Some(user) => Identity::new("user", user, "free"),
        None => {
            let peer = request.extensions().get::<SocketAddr>()?;
            Identity::new("ip", peer.ip().to_string(), "free")
        }
    };
    Some(RequestKey {
        identity,
        endpoint: format!("{} {}", request.method(), request.uri().path()),
        cost: 1,
    })
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = parse_args();
    let rules = match &args.rules {
        Some(path) => std::fs::read_to_string(path)?,
        None => DEFAULT_RULES.to_string(),
    };
    let mode = if args.cached {
        Mode::Cached {
            sync_interval: Duration::from_millis(50),
        }
    } else {
        Mode::Exact
    };
    let limiter = Limiter::builder([args.server.clone()])
        .rules_toml(&rules)?
        .mode(mode)
        .call_timeout(Duration::from_millis(20))
        .build()
        .await?;
    let upstream = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let origin = args.origin.clone();
    let forward = tower::service_fn(move |request: GatewayRequest| {
        let upstream = upstream.clone();
        let origin = origin.clone();
        async move {
            let Some(origin) = origin else {
                return Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"ok\n"))));
            };
            let (mut parts, body) = request.into_parts();
            let path = parts
                .uri
                .path_and_query()
                .map_or("/", |p| p.as_str())
                .to_string();
            parts.uri = format!("http://{origin}{path}")
                .parse()
                .expect("origin uri");
            let response = match upstream.request(Request::from_parts(parts, body)).await {
                Ok(response) => response,
                Err(_) => {
                    let mut bad =
                        Response::new(Full::new(Bytes::from_static(b"origin unreachable\n")));
                    *bad.status_mut() = StatusCode::BAD_GATEWAY;
                    return Ok(bad);
                }
            };
            let (parts, body) = response.into_parts();
            let bytes = body
                .collect()
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            Ok(Response::from_parts(parts, Full::new(bytes)))
        }
    });
    let service = RateLimitLayer::new(limiter, classify).layer(forward);
    let listener = tokio::net::TcpListener::bind(args.listen).await?;
    println!("gateway on http://{} (server {})", args.listen, args.server);
    loop {
        let (stream, peer) = listener.accept().await?;
        let service = service.clone();
        tokio::spawn(async move {
            let handler = hyper::service::service_fn(move |request: Request<Incoming>| {
                let mut service = service.clone();
                async move {
                    let (mut parts, body) = request.into_parts();
                    parts.extensions.insert(peer);
                    let bytes = body
                        .collect()
                        .await
                        .map(|b| b.to_bytes())
                        .unwrap_or_default();
                    service
                        .call(Request::from_parts(parts, Full::new(bytes)))
                        .await
                }
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), handler)
                .await;
        });
    }
}
