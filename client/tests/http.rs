//! The tower layer in front of a service: allowed responses carry the
//! rate-limit headers, a denial is the exact 429 response.

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use tally_client::tower::{RateLimitLayer, RequestKey};
use tally_client::{Identity, Limiter, LimiterConfig, Mode};
use tally_tests::TestServer;
use tower::{Layer, ServiceExt};

async fn origin(_request: Request<Full<Bytes>>) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(Response::new(Full::new(Bytes::from_static(
        b"hello from the origin",
    ))))
}

/// The identity is the `x-user` header; the endpoint is method and path.
fn classify(request: &Request<Full<Bytes>>) -> Option<RequestKey> {
    let user = request.headers().get("x-user")?.to_str().ok()?;
    Some(RequestKey {
        identity: Identity::new("user", user, "free"),
        endpoint: format!("{} {}", request.method(), request.uri().path()),
        cost: 1,
    })
}

fn request(user: Option<&str>) -> Request<Full<Bytes>> {
    let mut builder = Request::get("/search");
    if let Some(user) = user {
        builder = builder.header("x-user", user);
    }
    builder.body(Full::new(Bytes::new())).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_layer_passes_with_headers_and_answers_429_when_over() {
    let tally = TestServer::start().await;
    let limiter = Limiter::builder([format!("redis://{}", tally.addr())])
        .rules_toml(
            r#"
            [tiers.free]
            global = { limit = 100, window_seconds = 60 }
            endpoints."GET /search" = { limit = 2, window_seconds = 60 }
            "#,
        )
        .unwrap()
        .config(LimiterConfig {
            mode: Mode::Exact,
            call_timeout: Duration::from_secs(2),
            background_tasks: false,
            ..LimiterConfig::default()
        })
        .build()
        .await
        .unwrap();
    let service = RateLimitLayer::new(limiter, classify).layer(tower::service_fn(origin));
    // The server's clock is the tests' fixed T0 (1720000000 s), so the 60 s
    // window ends at floor(T0 / 60) * 60 + 60.
    let reset = 1_720_000_000u64 / 60 * 60 + 60;
    let seconds_left = reset - 1_720_000_000;

    let response = service.clone().oneshot(request(Some("u1"))).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let headers = response.headers();
    assert_eq!(headers["x-ratelimit-limit"], "2");
    assert_eq!(headers["x-ratelimit-remaining"], "1");
    assert_eq!(headers["x-ratelimit-reset"], reset.to_string().as_str());
    assert!(headers.get("retry-after").is_none());
    assert_eq!(
        headers["ratelimit-policy"],
        "\"global\";q=100;w=60, \"endpoint\";q=2;w=60"
    );
    assert_eq!(
        headers["ratelimit"],
        format!("\"endpoint\";r=1;t={seconds_left}").as_str()
    );
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(&body[..], b"hello from the origin");

    let second = service.clone().oneshot(request(Some("u1"))).await.unwrap();
    assert_eq!(second.status(), StatusCode::OK);
    assert_eq!(second.headers()["x-ratelimit-remaining"], "0");

    let denied = service.clone().oneshot(request(Some("u1"))).await.unwrap();
    assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS);
    let headers = denied.headers().clone();
    assert_eq!(headers["content-type"], "application/json");
    assert_eq!(headers["x-ratelimit-limit"], "2");
    assert_eq!(headers["x-ratelimit-remaining"], "0");
    assert_eq!(headers["x-ratelimit-reset"], reset.to_string().as_str());
    assert_eq!(headers["retry-after"], seconds_left.to_string().as_str());
    assert_eq!(
        headers["ratelimit"],
        format!("\"endpoint\";r=0;t={seconds_left}").as_str()
    );
    let body = denied.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(
        std::str::from_utf8(&body).unwrap(),
        format!("{{\"error\":\"rate_limit_exceeded\",\"retry_after_seconds\":{seconds_left}}}")
    );

    // Another user is counted apart; a request without identity passes untouched.
    let other = service.clone().oneshot(request(Some("u2"))).await.unwrap();
    assert_eq!(other.status(), StatusCode::OK);
    let anonymous = service.clone().oneshot(request(None)).await.unwrap();
    assert_eq!(anonymous.status(), StatusCode::OK);
    assert!(anonymous.headers().get("x-ratelimit-limit").is_none());
}
