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

/// The earliest notAfter (Unix seconds) among `certs`; `None` when none parses.
pub fn earliest_expiry<'a>(certs: impl IntoIterator<Item = &'a CertificateDer<'a>>) -> Option<i64> {
    certs
        .into_iter()
        .filter_map(|der| x509_parser::parse_x509_certificate(der).ok())
        .map(|(_, cert)| cert.validity().not_after.timestamp())
        .min()
}

/// The earliest notAfter on the path from `leaf` up through the presented `intermediates`
/// that issue it, each found by its subject being the one before's issuer. A certificate
/// sent but not on that path (an expired cross-signature kept for old clients, Let's
/// Encrypt's DST Root X3 case) is no part of what a client verifies, and its date would
/// page for a healthy endpoint. `None` when the leaf does not parse.
pub fn path_expiry(leaf: &CertificateDer<'_>, intermediates: &[CertificateDer<'_>]) -> Option<i64> {
    let (_, leaf) = x509_parser::parse_x509_certificate(leaf).ok()?;
    let mut rest: Vec<_> = intermediates
        .iter()
        .filter_map(|der| x509_parser::parse_x509_certificate(der).ok())
        .map(|(_, cert)| cert)
        .collect();
    let mut earliest = leaf.validity().not_after.timestamp();
    let mut issuer = leaf.issuer().as_raw().to_vec();
    let mut subject = leaf.subject().as_raw().to_vec();
    while issuer != subject {
        let Some(at) = rest
            .iter()
            .position(|c| c.subject().as_raw() == issuer.as_slice())
        else {
            break;
        };
        let next = rest.swap_remove(at);
        earliest = earliest.min(next.validity().not_after.timestamp());
        issuer = next.issuer().as_raw().to_vec();
        subject = next.subject().as_raw().to_vec();
    }
    Some(earliest)
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

/// A target's TLS: its client configuration, the watch that keeps the server chain's
/// expiry fresh, and the client certificate's earliest notAfter (recorded when the prober
/// starts, not here: a configuration that fails to load must leave the series alone).
pub struct Built {
    pub config: ClientConfig,
    pub watch: Arc<CertWatch>,
    pub client_expiry: Option<i64>,
}

/// The client configuration for `options`, recording into `series`. `resume`: whether a
/// new connection may resume an earlier TLS session (not with `connection = "fresh"`: a
/// new user has no session to resume, and a full handshake is what it pays).
pub fn config(
    options: &TlsOptions,
    series: &ConnectionSeries,
    resume: bool,
) -> Result<Built, TlsSetupError> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let inner: Arc<dyn ServerCertVerifier> = if options.insecure_skip_verify {
        Arc::new(NoVerifier)
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
        expiry: std::sync::atomic::AtomicI64::new(i64::MIN),
    });
    let verifier = Arc::new(Recording {
        inner,
        watch: Arc::clone(&watch),
    });
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    let mut client_expiry = None;
    let mut config = match &options.identity_pem {
        None => builder.with_no_client_auth(),
        Some(pem) => {
            let pem = pem.expose().as_bytes();
            let chain = CertificateDer::pem_slice_iter(pem)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| TlsSetupError::Identity(e.to_string()))?;
            client_expiry = earliest_expiry(&chain);
            let key = PrivateKeyDer::from_pem_slice(pem)
                .map_err(|e| TlsSetupError::Identity(format!("private key: {e}")))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| TlsSetupError::Identity(e.to_string()))?
        }
    };
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    // The store is asked at every ClientHello, resuming or not: it marks the TLS start.
    let store = MarkingStore {
        cache: ClientSessionMemoryCache::new(256),
        resume,
    };
    config.resumption = Resumption::store(Arc::new(store));
    Ok(Built {
        config,
        watch,
        client_expiry,
    })
}

/// Keeps the server chain's expiry from going stale (module doc).
#[derive(Debug)]
pub struct CertWatch {
    series: ConnectionSeries,
    last_full: Mutex<Option<Instant>>,
    refreshing: AtomicBool,
    /// The last expiry seen (Unix seconds), `i64::MIN` before any.
    expiry: std::sync::atomic::AtomicI64,
}

impl CertWatch {
    /// The last expiry seen, if any.
    pub fn expiry(&self) -> Option<i64> {
        Some(self.expiry.load(Ordering::Relaxed)).filter(|&e| e != i64::MIN)
    }

    fn seen(&self, expiry: Option<i64>) {
        *self.last_full.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
        if let Some(expiry) = expiry {
            self.expiry.store(expiry, Ordering::Relaxed);
            self.series.cert_expiry(Chain::Server, expiry as f64);
        }
    }

    /// Whether the chain has gone unseen for [`CERT_REFRESH`] (or was never seen), and no
    /// refresh runs: the caller then runs [`refresh`] and the flag stays set until it ends.
    /// A claimed refresh counts as a sighting: one that fails (the address unreachable,
    /// the handshake timing out) is not tried again for [`CERT_REFRESH`], while the probes'
    /// own handshakes keep the value fresh if they can.
    pub fn claim_refresh(&self) -> bool {
        let mut last = self.last_full.lock().unwrap_or_else(|e| e.into_inner());
        let stale = last.is_none_or(|at| at.elapsed() >= CERT_REFRESH);
        if !stale || self.refreshing.swap(true, Ordering::AcqRel) {
            return false;
        }
        *last = Some(Instant::now());
        true
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
        Ok(Err(e)) => {
            tracing::debug!(%host, port, error = %e, "certificate refresh handshake failed")
        }
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
        self.watch.seen(path_expiry(end_entity, intermediates));
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

/// `insecure_skip_verify`: anything is accepted, the handshake's signatures too, as
/// reqwest's own setting does (a certificate webpki cannot parse, a version-1 one, a SHA-1
/// signature: what a user who turned verification off expects to work).
#[derive(Debug)]
struct NoVerifier;

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
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }

    fn verify_tls13_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        use SignatureScheme::*;
        vec![
            RSA_PKCS1_SHA1,
            ECDSA_SHA1_Legacy,
            RSA_PKCS1_SHA256,
            ECDSA_NISTP256_SHA256,
            RSA_PKCS1_SHA384,
            ECDSA_NISTP384_SHA384,
            RSA_PKCS1_SHA512,
            ECDSA_NISTP521_SHA512,
            RSA_PSS_SHA256,
            RSA_PSS_SHA384,
            RSA_PSS_SHA512,
            ED25519,
            ED448,
        ]
    }
}

/// rustls' session cache, noting the instant rustls first asks it for anything: that is
/// while it writes the ClientHello, the first thing it does once TCP is connected. Without
/// `resume` it keeps nothing, so every handshake is a full one.
#[derive(Debug)]
struct MarkingStore {
    cache: ClientSessionMemoryCache,
    resume: bool,
}

impl ClientSessionStore for MarkingStore {
    fn set_kx_hint(&self, server_name: ServerName<'static>, group: rustls::NamedGroup) {
        self.cache.set_kx_hint(server_name, group);
    }

    fn kx_hint(&self, server_name: &ServerName<'_>) -> Option<rustls::NamedGroup> {
        phases::hello();
        self.cache.kx_hint(server_name)
    }

    fn set_tls12_session(
        &self,
        server_name: ServerName<'static>,
        value: rustls::client::Tls12ClientSessionValue,
    ) {
        if self.resume {
            self.cache.set_tls12_session(server_name, value);
        }
    }

    fn tls12_session(
        &self,
        server_name: &ServerName<'_>,
    ) -> Option<rustls::client::Tls12ClientSessionValue> {
        phases::hello();
        self.cache.tls12_session(server_name)
    }

    fn remove_tls12_session(&self, server_name: &ServerName<'static>) {
        self.cache.remove_tls12_session(server_name);
    }

    fn insert_tls13_ticket(
        &self,
        server_name: ServerName<'static>,
        value: rustls::client::Tls13ClientSessionValue,
    ) {
        if self.resume {
            self.cache.insert_tls13_ticket(server_name, value);
        }
    }

    fn take_tls13_ticket(
        &self,
        server_name: &ServerName<'static>,
    ) -> Option<rustls::client::Tls13ClientSessionValue> {
        phases::hello();
        self.cache.take_tls13_ticket(server_name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};

    fn ca(
        name: &str,
        year: i32,
        issuer: Option<&CertifiedIssuer<'static, KeyPair>>,
    ) -> CertifiedIssuer<'static, KeyPair> {
        let mut params = CertificateParams::new(Vec::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        params.not_after = rcgen::date_time_ymd(year, 1, 1);
        let key = KeyPair::generate().unwrap();
        match issuer {
            None => CertifiedIssuer::self_signed(params, key).unwrap(),
            Some(issuer) => CertifiedIssuer::signed_by(params, key, issuer).unwrap(),
        }
    }

    fn unix(year: i32) -> i64 {
        rcgen::date_time_ymd(year, 1, 1).unix_timestamp()
    }

    /// The path from the leaf through the intermediates that issue it: an intermediate
    /// expiring before the leaf counts; a presented certificate off the path (an expired
    /// cross-signature) does not; the order they come in does not matter.
    #[test]
    fn the_expiry_is_the_earliest_on_the_path_the_leaf_takes() {
        let root = ca("root", 2040, None);
        let intermediate = ca("intermediate", 2030, Some(&root));
        let stale = ca("old cross-sign", 2021, None);
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(vec!["localhost".into()]).unwrap();
        params.not_after = rcgen::date_time_ymd(2035, 1, 1);
        let leaf = params.signed_by(&key, &intermediate).unwrap();
        let (leaf, intermediate, stale) = (
            leaf.der().clone(),
            intermediate.der().clone(),
            stale.der().clone(),
        );
        let path = [stale.clone(), intermediate.clone()];
        assert_eq!(path_expiry(&leaf, &path), Some(unix(2030)));
        assert_eq!(path_expiry(&leaf, &[]), Some(unix(2035)));
        // Every presented certificate, as earliest_expiry counts them, would say 2021.
        let all = [leaf.clone(), stale, intermediate];
        assert_eq!(earliest_expiry(&all), Some(unix(2021)));
        assert_eq!(
            path_expiry(&CertificateDer::from(vec![0x30, 0x03]), &[]),
            None
        );
    }

    /// A refresh that was claimed, failed or not, is not claimed again within the period.
    #[test]
    fn a_refresh_is_claimed_once_per_period() {
        let watch = CertWatch {
            series: ConnectionSeries::default(),
            last_full: Mutex::new(None),
            refreshing: AtomicBool::new(false),
            expiry: std::sync::atomic::AtomicI64::new(i64::MIN),
        };
        assert!(watch.claim_refresh());
        assert!(!watch.claim_refresh(), "one at a time");
        watch.refreshed();
        assert!(
            !watch.claim_refresh(),
            "a failed attempt waits its period too"
        );
    }
}
