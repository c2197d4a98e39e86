//! [`Principal`]: who a request is from, as an authenticator established it,
//! and [`ClientAddr`], the peer address when nobody is authenticated.

use std::collections::BTreeSet;
use std::net::IpAddr;

/// The authenticated caller of a request: a subject and the scopes its token
/// grants. The HTTP transport puts it into the request's [`super::Assigns`]
/// when an authenticator accepts a bearer token, so tools, prompts and
/// `subscribe` read it with `assigns().get::<Principal>()`.
///
/// It is also what the runtime counts streams by
/// (`Limits::max_streams_per_principal`) and what a sealed MRTR
/// `requestState` is bound to.
///
/// ```
/// use genmcp::mux::Principal;
/// let p = Principal::new("ada").with_scopes(["mcp:read", "admin"]);
/// assert_eq!(p.subject(), "ada");
/// assert!(p.has_scope("mcp:read"));
/// assert!(p.is_admin());
/// assert!(!Principal::new("bob").is_admin());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    subject: String,
    scopes: BTreeSet<String>,
}

impl Principal {
    /// The scope [`Principal::is_admin`] looks for.
    pub const ADMIN_SCOPE: &'static str = "admin";

    /// A principal named `subject` with no scopes.
    pub fn new(subject: impl Into<String>) -> Self {
        Principal {
            subject: subject.into(),
            scopes: BTreeSet::new(),
        }
    }

    /// With these scopes added.
    pub fn with_scopes<S: Into<String>>(mut self, scopes: impl IntoIterator<Item = S>) -> Self {
        self.scopes.extend(scopes.into_iter().map(Into::into));
        self
    }

    /// The subject (`sub` of a JWT, the name in a token table).
    pub fn subject(&self) -> &str {
        &self.subject
    }

    /// The granted scopes.
    pub fn scopes(&self) -> impl Iterator<Item = &str> {
        self.scopes.iter().map(String::as_str)
    }

    /// Whether `scope` was granted.
    pub fn has_scope(&self, scope: &str) -> bool {
        self.scopes.contains(scope)
    }

    /// Whether the [`Principal::ADMIN_SCOPE`] (`admin`) was granted: the flag
    /// of a token-table line, or the `admin` scope of a JWT.
    pub fn is_admin(&self) -> bool {
        self.has_scope(Self::ADMIN_SCOPE)
    }
}

/// The peer address of an HTTP request, in its [`super::Assigns`]: what limits
/// per principal count by when the request has no [`Principal`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientAddr(pub IpAddr);

/// The key the HTTP transport counts this request's limits by, set once on
/// its head (principal, else client address with IPv6 grouped by prefix, else
/// one shared key when there is no peer address), so every limit per
/// principal (request rate, open streams, 2025 sessions, tasks) counts alike.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LimitKey(pub(crate) String);

/// The key limits per principal count by: the transport's [`LimitKey`] when
/// it set one, else `p:<subject>` for a principal, `a:<ip>` for an anonymous
/// peer, `None` when neither is known (stdio: one client per pipe).
pub(crate) fn limit_key(assigns: &super::Assigns) -> Option<String> {
    if let Some(key) = assigns.get::<LimitKey>() {
        return Some(key.0.clone());
    }
    if let Some(p) = assigns.get::<Principal>() {
        return Some(format!("p:{}", p.subject()));
    }
    assigns.get::<ClientAddr>().map(|a| format!("a:{}", a.0))
}
