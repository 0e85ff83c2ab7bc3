//! A tower [`Layer`](tower_layer::Layer) for axum and hyper services
//! (feature `tower`): requests over their limit get the 429 response built
//! from the [`Decision`]; the others pass on and their responses carry the
//! rate-limit headers.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Request, Response, StatusCode};

use crate::{Decision, Identity, Limiter};

/// What the layer needs to know about a request.
#[derive(Debug, Clone)]
pub struct RequestKey {
    /// Who is counted.
    pub identity: Identity,
    /// The endpoint, as named in the rules (`"GET /search"`).
    pub endpoint: String,
    /// Usually 1.
    pub cost: u64,
}

/// Wraps services in [`RateLimit`].
#[derive(Clone)]
pub struct RateLimitLayer<F> {
    limiter: Limiter,
    classify: F,
}

impl<F> RateLimitLayer<F> {
    /// `classify` names the identity and endpoint of a request; a request
    /// it returns `None` for is not limited.
    pub fn new(limiter: Limiter, classify: F) -> RateLimitLayer<F> {
        RateLimitLayer { limiter, classify }
    }
}

impl<S, F: Clone> tower_layer::Layer<S> for RateLimitLayer<F> {
    type Service = RateLimit<S, F>;
    fn layer(&self, inner: S) -> RateLimit<S, F> {
        RateLimit {
            inner,
            limiter: self.limiter.clone(),
            classify: self.classify.clone(),
        }
    }
}

/// The rate-limiting service.
#[derive(Clone)]
pub struct RateLimit<S, F> {
    inner: S,
    limiter: Limiter,
    classify: F,
}

/// The 429 response for a denial: the decision's headers, JSON content type
/// and the JSON body docs/client.md gives.
pub fn too_many_requests<B: From<Bytes>>(decision: &Decision) -> Response<B> {
    let body = decision.body().unwrap_or_default();
    let mut response = Response::new(B::from(Bytes::from(body)));
    *response.status_mut() = StatusCode::TOO_MANY_REQUESTS;
    let headers = response.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    add_headers(headers, decision);
    response
}

fn add_headers(headers: &mut http::HeaderMap, decision: &Decision) {
    for (name, value) in decision.headers() {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(HeaderName::from_static(lower(name)), value);
        }
    }
}

/// Header names as `http` wants them (lower case, static).
fn lower(name: &'static str) -> &'static str {
    match name {
        "X-RateLimit-Limit" => "x-ratelimit-limit",
        "X-RateLimit-Remaining" => "x-ratelimit-remaining",
        "X-RateLimit-Reset" => "x-ratelimit-reset",
        "Retry-After" => "retry-after",
        "RateLimit-Policy" => "ratelimit-policy",
        "RateLimit" => "ratelimit",
        other => other,
    }
}

impl<S, F, ReqBody, ResBody> tower_service::Service<Request<ReqBody>> for RateLimit<S, F>
where
    S: tower_service::Service<Request<ReqBody>, Response = Response<ResBody>>
        + Clone
        + Send
        + 'static,
    S::Future: Send,
    F: Fn(&Request<ReqBody>) -> Option<RequestKey>,
    ReqBody: Send + 'static,
    ResBody: From<Bytes> + Send + 'static,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<ResBody>, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let key = (self.classify)(&request);
        let limiter = self.limiter.clone();
        // Keep the service that was polled ready; leave a fresh clone behind.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        Box::pin(async move {
            let Some(key) = key else {
                return inner.call(request).await;
            };
            let decision = limiter.check(&key.identity, &key.endpoint, key.cost).await;
            if !decision.allowed {
                return Ok(too_many_requests(&decision));
            }
            let mut response = inner.call(request).await?;
            add_headers(response.headers_mut(), &decision);
            Ok(response)
        })
    }
}
