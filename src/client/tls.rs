//! The client's TLS configuration, built here rather than by reqwest so that two things
//! can be seen that reqwest does not show: the whole certificate chain a target presents
//! (reqwest's `TlsInfo` has the leaf alone), read by a verifier that wraps the real one,
//! and the instant the handshake starts, which splits a new connection's setup into TCP
//! connect and TLS ([`super::phases`]).
//!
//! Trust is what reqwest's own rustls setup gives: the platform's roots (through
//! rustls-platform-verifier) plus a configured CA bundle, a client certificate for mutual
//! TLS, verification off only when told, ALPN h2 then http/1.1.
//!
//! A pooled connection may live for days, and a resumed handshake carries no certificate,
//! so a renewed (or replaced) certificate could go unseen: [`CertWatch`] makes a full
//! handshake of its own, without resumption and without HTTP, whenever none has been seen
//! for [`CERT_REFRESH`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{ClientSessionMemoryCache, ClientSessionStore, Resumption};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, DistinguishedName, SignatureScheme};

use super::phases;
use crate::endpoint::TlsOptions;
use crate::metrics::connection::{Chain, ConnectionSeries};

/// How long the server chain may go unseen before a handshake of its own reads it again.
pub const CERT_REFRESH: Duration = Duration::from_secs(15 * 60);

/// The earliest notAfter (Unix seconds) among `certs`; `None` when none parses (the
/// verifier then fails the handshake on its own terms).
pub fn earliest_expiry<'a>(certs: impl IntoIterator<Item = &'a CertificateDer<'a>>) -> Option<i64> {
    certs
        .into_iter()
        .filter_map(|der| x509_parser::parse_x509_certificate(der).ok())
        .map(|(_, cert)| cert.validity().not_after.timestamp())
        .min()
}

/// A TLS configuration problem, naming the file part at fault.
#[derive(Debug, thiserror::Error)]
pub enum TlsSetupError {
    #[error("TLS CA bundle: {0}")]
    Ca(String),
    #[error("TLS client certificate: {0}")]
    Identity(String),
    #[error("TLS: {0}")]
    Other(#[from] rustls::Error),
}

/// The client configuration for `options`, recording into `series`; with the watch that
/// keeps the server chain's expiry fresh.
pub fn config(
    options: &TlsOptions,
    series: &ConnectionSeries,
) -> Result<(ClientConfig, Arc<CertWatch>), TlsSetupError> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let inner: Arc<dyn ServerCertVerifier> = if options.insecure_skip_verify {
        Arc::new(NoVerifier(provider.signature_verification_algorithms))
    } else {
        let extra = match &options.ca_pem {
            None => Vec::new(),
            Some(pem) => CertificateDer::pem_slice_iter(pem)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| TlsSetupError::Ca(e.to_string()))?,
        };
        Arc::new(
            rustls_platform_verifier::Verifier::new_with_extra_roots(extra, Arc::clone(&provider))
                .map_err(TlsSetupError::Other)?,
        )
    };
    let watch = Arc::new(CertWatch {
        series: series.clone(),
        last_full: Mutex::new(None),
        refreshing: AtomicBool::new(false),
    });
    let verifier = Arc::new(Recording {
        inner,
        watch: Arc::clone(&watch),
    });
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    let mut config = match &options.identity_pem {
        None => builder.with_no_client_auth(),
        Some(pem) => {
            let pem = pem.expose().as_bytes();
            let chain = CertificateDer::pem_slice_iter(pem)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| TlsSetupError::Identity(e.to_string()))?;
            if let Some(expiry) = earliest_expiry(&chain) {
                series.cert_expiry(Chain::Client, expiry as f64);
            }
            let key = PrivateKeyDer::from_pem_slice(pem)
                .map_err(|e| TlsSetupError::Identity(format!("private key: {e}")))?;
            builder.with_client_auth_cert(chain, key)?
        }
    };
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    config.resumption = Resumption::store(Arc::new(MarkingStore(
        ClientSessionMemoryCache::new(256),
    )));
    Ok((config, watch))
}

/// Keeps the server chain's expiry from going stale (module doc).
#[derive(Debug)]
pub struct CertWatch {
    series: ConnectionSeries,
    last_full: Mutex<Option<Instant>>,
    refreshing: AtomicBool,
}

impl CertWatch {
    fn seen(&self, expiry: Option<i64>) {
        *self.last_full.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
        if let Some(expiry) = expiry {
            self.series.cert_expiry(Chain::Server, expiry as f64);
        }
    }

    /// Whether the chain has gone unseen for [`CERT_REFRESH`] (or was never seen), and no
    /// refresh runs: the caller then runs [`refresh`] and the flag stays set until it ends.
    pub fn claim_refresh(&self) -> bool {
        let last = *self.last_full.lock().unwrap_or_else(|e| e.into_inner());
        let stale = last.is_none_or(|at| at.elapsed() >= CERT_REFRESH);
        stale && !self.refreshing.swap(true, Ordering::AcqRel)
    }

    fn refreshed(&self) {
        self.refreshing.store(false, Ordering::Release);
    }
}

/// One full handshake with `host:port`, without resumption and without sending HTTP, so the
/// verifier sees the chain; then the connection is closed. Failures are left to the probes
/// (they meet the same handshake); only a debug line says so.
pub async fn refresh(
    config: &ClientConfig,
    watch: Arc<CertWatch>,
    host: String,
    port: u16,
    timeout: Duration,
) {
    let mut config = config.clone();
    config.resumption = Resumption::disabled();
    let handshake = async {
        let name = ServerName::try_from(host.clone()).map_err(std::io::Error::other)?;
        let tcp = tokio::net::TcpStream::connect((host.as_str(), port)).await?;
        tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(name, tcp)
            .await
            .map(drop)
    };
    match tokio::time::timeout(timeout, handshake).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::debug!(%host, port, error = %e, "certificate refresh handshake failed"),
        Err(_) => tracing::debug!(%host, port, "certificate refresh handshake timed out"),
    }
    watch.refreshed();
}

/// The real verifier, after noting the presented chain's earliest expiry (before it
/// judges: an expired certificate fails the handshake, and its date is what to show).
#[derive(Debug)]
struct Recording {
    inner: Arc<dyn ServerCertVerifier>,
    watch: Arc<CertWatch>,
}

impl ServerCertVerifier for Recording {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.watch
            .seen(earliest_expiry(std::iter::once(end_entity).chain(intermediates)));
        self.inner
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }

    fn requires_raw_public_keys(&self) -> bool {
        self.inner.requires_raw_public_keys()
    }

    fn root_hint_subjects(&self) -> Option<&[DistinguishedName]> {
        self.inner.root_hint_subjects()
    }
}

/// `insecure_skip_verify`: any chain is accepted; signatures are still checked, so the
/// handshake is a real one.
#[derive(Debug)]
struct NoVerifier(rustls::crypto::WebPkiSupportedAlgorithms);

impl ServerCertVerifier for NoVerifier {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_schemes()
    }
}

/// rustls' session cache, noting the instant rustls first asks it for anything: that is
/// while it writes the ClientHello, the first thing it does once TCP is connected.
#[derive(Debug)]
struct MarkingStore(ClientSessionMemoryCache);

impl ClientSessionStore for MarkingStore {
    fn set_kx_hint(&self, server_name: ServerName<'static>, group: rustls::NamedGroup) {
        self.0.set_kx_hint(server_name, group);
    }

    fn kx_hint(&self, server_name: &ServerName<'_>) -> Option<rustls::NamedGroup> {
        phases::hello();
        self.0.kx_hint(server_name)
    }

    fn set_tls12_session(
        &self,
        server_name: ServerName<'static>,
        value: rustls::client::Tls12ClientSessionValue,
    ) {
        self.0.set_tls12_session(server_name, value);
    }

    fn tls12_session(
        &self,
        server_name: &ServerName<'_>,
    ) -> Option<rustls::client::Tls12ClientSessionValue> {
        phases::hello();
        self.0.tls12_session(server_name)
    }

    fn remove_tls12_session(&self, server_name: &ServerName<'static>) {
        self.0.remove_tls12_session(server_name);
    }

    fn insert_tls13_ticket(
        &self,
        server_name: ServerName<'static>,
        value: rustls::client::Tls13ClientSessionValue,
    ) {
        self.0.insert_tls13_ticket(server_name, value);
    }

    fn take_tls13_ticket(
        &self,
        server_name: &ServerName<'static>,
    ) -> Option<rustls::client::Tls13ClientSessionValue> {
        phases::hello();
        self.0.take_tls13_ticket(server_name)
    }
}
