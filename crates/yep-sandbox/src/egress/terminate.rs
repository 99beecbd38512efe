//! A CONNECT the proxy answers itself: it terminates the client's TLS with a certificate its
//! CA signed for the host, reads each request (keep-alive: many on one tunnel), vets it
//! ([`inspect::vet`]), and sends it on over one TLS connection of its own to the origin,
//! verified against the system's roots, opened again if the origin closes it.

use super::*;
use tokio::sync::Mutex as AsyncMutex;

/// One terminated tunnel: where its requests go, and the connection they go over.
struct Tunnel {
    shared: Arc<Shared>,
    host: String,
    port: u16,
    /// The origin connection: the one the CONNECT opened, until it is used and closes.
    origin: AsyncMutex<Origin>,
}

enum Origin {
    /// Connected, TLS not yet begun.
    Fresh(TcpStream),
    Open(hyper::client::conn::http1::SendRequest<Incoming>),
    Closed,
}

/// Answer a CONNECT to `host:port` `200` and serve what comes through it, as the module
/// says; `because` is why this host is terminated (for a client that refuses the
/// certificate).
pub(super) fn terminate(
    shared: Arc<Shared>,
    slot: Arc<OwnedSemaphorePermit>,
    request: Request<Incoming>,
    upstream: TcpStream,
    host: String,
    port: u16,
    because: String,
) -> Response<Body> {
    let stop = shared.stop.clone();
    tokio::spawn(async move {
        let _slot = slot;
        let served = async {
            let Ok(upgraded) = hyper::upgrade::on(request).await else {
                return;
            };
            let tunnel = Arc::new(Tunnel {
                shared,
                host,
                port,
                origin: AsyncMutex::new(Origin::Fresh(upstream)),
            });
            tunnel.serve(TokioIo::new(upgraded), because).await;
        };
        tokio::select! {
            () = served => {}
            () = stop.cancelled() => {}
        }
    });
    Response::new(empty())
}

impl Tunnel {
    /// Terminate the client's TLS and answer its requests until it closes.
    async fn serve(self: Arc<Tunnel>, client: TokioIo<hyper::upgrade::Upgraded>, because: String) {
        let shared = &self.shared;
        let Some(config) = shared
            .ca
            .as_ref()
            .and_then(|ca| ca.server_config(&self.host).ok())
        else {
            return;
        };
        let accepted = tokio::time::timeout(
            HEADER_READ_TIMEOUT,
            tokio_rustls::TlsAcceptor::from(config).accept(client),
        )
        .await;
        let tls = match accepted {
            Ok(Ok(tls)) => tls,
            Ok(Err(e)) => {
                if refused_certificate(&e) {
                    let reason = Reason::Certificate { because };
                    shared.report(Refusal::of(&shared.package, &self.host, self.port, reason));
                }
                return;
            }
            Err(_) => return,
        };
        let tunnel = Arc::clone(&self);
        let service = hyper::service::service_fn(move |request: Request<Incoming>| {
            let tunnel = Arc::clone(&tunnel);
            async move { Ok::<_, Infallible>(tunnel.answer(request).await) }
        });
        let mut http1 = hyper::server::conn::http1::Builder::new();
        http1
            .timer(TokioTimer::new())
            .header_read_timeout(HEADER_READ_TIMEOUT)
            .max_buf_size(MAX_HEAD_BYTES);
        let _ = http1.serve_connection(TokioIo::new(tls), service).await;
    }

    /// The answer to one request inside the tunnel.
    async fn answer(&self, request: Request<Incoming>) -> Response<Body> {
        let shared = &self.shared;
        let (mut parts, body) = request.into_parts();
        let put = match inspect::vet(shared, &self.host, self.port, &mut parts) {
            Ok(put) => put,
            Err(refusal) => return shared.refuse(*refusal),
        };
        shared.told(&self.host, self.port, &parts, put);
        strip_hop_by_hop(&mut parts.headers);
        // The origin serves the host the tunnel was opened to and checked, whatever `Host`
        // the client sent: a secret never reaches another name behind the same address.
        let authority = match self.port {
            443 => self.host.clone(),
            port => target(&self.host, port),
        };
        let Ok(host_header) = HeaderValue::from_str(&authority) else {
            return text(
                StatusCode::BAD_REQUEST,
                "the host is no header value".into(),
            );
        };
        parts.headers.insert(header::HOST, host_header);
        let origin_form = parts
            .uri
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .parse::<http::Uri>()
            .unwrap_or_else(|_| http::Uri::from_static("/"));
        parts.uri = origin_form;
        let mut origin = self.origin.lock().await;
        let sender = match self.sender(&mut origin).await {
            Ok(sender) => sender,
            Err(why) => {
                *origin = Origin::Closed;
                return text(
                    StatusCode::BAD_GATEWAY,
                    format!(
                        "yep's egress proxy could not reach {} over TLS: {why}",
                        target(&self.host, self.port)
                    ),
                );
            }
        };
        match sender.send_request(Request::from_parts(parts, body)).await {
            Ok(response) => {
                let (mut parts, body) = response.into_parts();
                strip_hop_by_hop(&mut parts.headers);
                Response::from_parts(parts, body.boxed())
            }
            Err(e) => {
                *origin = Origin::Closed;
                text(
                    StatusCode::BAD_GATEWAY,
                    format!(
                        "yep's egress proxy lost {}: {e}",
                        target(&self.host, self.port)
                    ),
                )
            }
        }
    }

    /// The origin connection, ready for a request: the first one's TLS begun on the
    /// connection the CONNECT opened, a closed one opened again (its name looked up and
    /// checked again).
    async fn sender<'a>(
        &self,
        origin: &'a mut Origin,
    ) -> Result<&'a mut hyper::client::conn::http1::SendRequest<Incoming>, String> {
        if let Origin::Open(sender) = origin
            && sender.ready().await.is_err()
        {
            *origin = Origin::Closed;
        }
        let stream = match std::mem::replace(origin, Origin::Closed) {
            Origin::Open(sender) => {
                *origin = Origin::Open(sender);
                let Origin::Open(sender) = origin else {
                    unreachable!("just set")
                };
                return Ok(sender);
            }
            Origin::Fresh(stream) => stream,
            Origin::Closed => {
                let shared = &self.shared;
                shared
                    .resolver
                    .connect(&self.host, self.port, &shared.allowed)
                    .await
                    .map_err(|e| e.to_string())?
            }
        };
        let config =
            tls::client_config(self.shared.origin_roots.as_deref()).map_err(|e| e.to_string())?;
        let name = tls::server_name(&self.host).map_err(|e| e.to_string())?;
        let tls = tokio::time::timeout(
            CONNECT_TIMEOUT,
            tokio_rustls::TlsConnector::from(config).connect(name, stream),
        )
        .await
        .map_err(|_| "the TLS handshake timed out".to_string())?
        .map_err(|e| e.to_string())?;
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .map_err(|e| e.to_string())?;
        let stop = self.shared.stop.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = connection => {}
                () = stop.cancelled() => {}
            }
        });
        *origin = Origin::Open(sender);
        let Origin::Open(sender) = origin else {
            unreachable!("just set")
        };
        Ok(sender)
    }
}

/// Whether a failed TLS accept was the client refusing the certificate (an alert during
/// the handshake), rather than a client that went away.
fn refused_certificate(e: &std::io::Error) -> bool {
    e.get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        .is_some_and(|e| matches!(e, rustls::Error::AlertReceived(_)))
}
