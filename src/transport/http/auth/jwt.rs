//! [`JwtAuthenticator`]: JWT access tokens checked against the keys of a JWKS
//! file, the issuer, the audience (this server) and the expiry.

use std::path::Path;

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::jwk::{
    AlgorithmParameters, EllipticCurve, Jwk, JwkSet, KeyAlgorithm, PublicKeyUse,
};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;

use super::{AuthError, AuthFuture, Authenticator, Principal};

/// Default clock-skew leeway for `exp` and `nbf`, in seconds.
pub const DEFAULT_JWT_LEEWAY_SECS: u64 = 60;

struct Key {
    kid: Option<String>,
    alg: Algorithm,
    key: DecodingKey,
}

/// Validates JWT access tokens (RFC 9068 style) as a resource server must:
///
/// - the signature, with a public key of the JWKS (picked by the token's
///   `kid`, or the only key when the set has one). Each key's algorithm is
///   fixed by the JWKS (its `alg`, else RS256 for RSA, ES256 / ES384 for
///   P-256 / P-384, EdDSA for Ed25519), never taken from the token; symmetric
///   (`oct`) keys and `use: "enc"` keys are not loaded, so `alg: none` and
///   HMAC tokens never verify;
/// - `iss` equal to the issuer, `aud` containing the audience (this server's
///   resource URL), `exp` in the future and `nbf` (if any) in the past, with
///   [`DEFAULT_JWT_LEEWAY_SECS`] of leeway; `iss`, `aud`, `exp` and `sub`
///   are required.
///
/// The principal is `sub`, its scopes the space-separated `scope` claim (or
/// the `scp` array). The `typ` header is not checked (many authorization
/// servers send `JWT` rather than `at+jwt`).
///
/// The keys are read once; to rotate them, restart (or build a new
/// authenticator: it is cheap).
pub struct JwtAuthenticator {
    keys: Vec<Key>,
    issuer: String,
    audience: String,
    leeway: u64,
}

impl std::fmt::Debug for JwtAuthenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtAuthenticator")
            .field("keys", &self.keys.len())
            .field("issuer", &self.issuer)
            .field("audience", &self.audience)
            .field("leeway", &self.leeway)
            .finish()
    }
}

fn key_algorithm(jwk: &Jwk) -> Option<Algorithm> {
    if let Some(alg) = jwk.common.key_algorithm {
        return match alg {
            KeyAlgorithm::RS256 => Some(Algorithm::RS256),
            KeyAlgorithm::RS384 => Some(Algorithm::RS384),
            KeyAlgorithm::RS512 => Some(Algorithm::RS512),
            KeyAlgorithm::PS256 => Some(Algorithm::PS256),
            KeyAlgorithm::PS384 => Some(Algorithm::PS384),
            KeyAlgorithm::PS512 => Some(Algorithm::PS512),
            KeyAlgorithm::ES256 => Some(Algorithm::ES256),
            KeyAlgorithm::ES384 => Some(Algorithm::ES384),
            KeyAlgorithm::EdDSA => Some(Algorithm::EdDSA),
            _ => None,
        };
    }
    match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => Some(Algorithm::RS256),
        AlgorithmParameters::EllipticCurve(ec) => match ec.curve {
            EllipticCurve::P256 => Some(Algorithm::ES256),
            EllipticCurve::P384 => Some(Algorithm::ES384),
            _ => None,
        },
        AlgorithmParameters::OctetKeyPair(_) => Some(Algorithm::EdDSA),
        _ => None,
    }
}

#[derive(Deserialize)]
struct Claims {
    sub: String,
    #[serde(default)]
    scope: Option<String>,
    #[serde(default)]
    scp: Option<Vec<String>>,
}

impl JwtAuthenticator {
    /// From the JSON text of a JWKS (`{"keys": [...]}`), for tokens of
    /// `issuer` meant for `audience` (this server's resource URL). Keys that
    /// cannot verify signatures (symmetric, encryption, unknown curve) are
    /// skipped; a set with no usable key is an error.
    pub fn from_jwks(
        jwks: &str,
        issuer: impl Into<String>,
        audience: impl Into<String>,
    ) -> Result<Self, AuthError> {
        let set: JwkSet = serde_json::from_str(jwks)
            .map_err(|e| AuthError::Config(format!("JWKS: not a JSON Web Key Set ({e})")))?;
        let mut keys = Vec::new();
        for jwk in &set.keys {
            if matches!(
                jwk.common.public_key_use,
                Some(PublicKeyUse::Encryption | PublicKeyUse::Other(_))
            ) || matches!(jwk.algorithm, AlgorithmParameters::OctetKey(_))
            {
                continue;
            }
            let Some(alg) = key_algorithm(jwk) else {
                continue;
            };
            let key = DecodingKey::from_jwk(jwk)
                .map_err(|e| AuthError::Config(format!("JWKS: unusable key ({e})")))?;
            keys.push(Key {
                kid: jwk.common.key_id.clone(),
                alg,
                key,
            });
        }
        if keys.is_empty() {
            return Err(AuthError::Config(
                "JWKS: no signature verification key (RSA, EC P-256/P-384 or Ed25519)".into(),
            ));
        }
        Ok(JwtAuthenticator {
            keys,
            issuer: issuer.into(),
            audience: audience.into(),
            leeway: DEFAULT_JWT_LEEWAY_SECS,
        })
    }

    /// [`JwtAuthenticator::from_jwks`] with the JWKS read from `path`.
    pub fn from_jwks_file(
        path: impl AsRef<Path>,
        issuer: impl Into<String>,
        audience: impl Into<String>,
    ) -> Result<Self, AuthError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .map_err(|e| AuthError::Config(format!("{}: {e}", path.display())))?;
        Self::from_jwks(&text, issuer, audience)
    }

    /// With `secs` of clock-skew leeway on `exp` and `nbf` (default
    /// [`DEFAULT_JWT_LEEWAY_SECS`]).
    pub fn leeway(mut self, secs: u64) -> Self {
        self.leeway = secs;
        self
    }

    /// The issuer tokens must come from.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// The audience tokens must name: this server's resource URL.
    pub fn audience(&self) -> &str {
        &self.audience
    }

    /// Checks `token`: its principal, or why not (`error_description`).
    pub fn verify(&self, token: &str) -> Result<Principal, AuthError> {
        let header =
            jsonwebtoken::decode_header(token).map_err(|_| AuthError::invalid("malformed"))?;
        let key = match &header.kid {
            Some(kid) => self.keys.iter().find(|k| k.kid.as_deref() == Some(kid)),
            None if self.keys.len() == 1 => self.keys.first(),
            None => None,
        }
        .ok_or_else(|| AuthError::invalid("no key for this token"))?;
        let mut validation = Validation::new(key.alg);
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(&[&self.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.validate_nbf = true;
        validation.leeway = self.leeway;
        let data = jsonwebtoken::decode::<Claims>(token, &key.key, &validation).map_err(|e| {
            AuthError::invalid(match e.kind() {
                ErrorKind::ExpiredSignature => "expired",
                ErrorKind::ImmatureSignature => "not yet valid",
                ErrorKind::InvalidIssuer => "wrong issuer",
                ErrorKind::InvalidAudience => "wrong audience",
                ErrorKind::InvalidSignature => "bad signature",
                ErrorKind::InvalidAlgorithm => "wrong algorithm",
                ErrorKind::MissingRequiredClaim(_) => "missing claim",
                _ => "malformed",
            })
        })?;
        let claims = data.claims;
        let mut principal = Principal::new(claims.sub);
        if let Some(scope) = &claims.scope {
            principal = principal.with_scopes(scope.split_whitespace());
        }
        if let Some(scp) = claims.scp {
            principal = principal.with_scopes(scp);
        }
        Ok(principal)
    }
}

impl Authenticator for JwtAuthenticator {
    fn authenticate(&self, token: &str) -> AuthFuture {
        let result = self.verify(token);
        Box::pin(async move { result })
    }
}
