//! Who a request comes from, as far as limits and the metadata document are
//! concerned: the client address (the TCP peer, or what a trusted proxy
//! forwarded in `X-Forwarded-For`), and the key limits per address count by
//! (IPv6 grouped by a prefix, one shared key when there is no address).

use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use actix_web::HttpRequest;

use crate::transport::http::HttpConfig;

/// The key of every request without a peer address (a Unix socket, a test
/// request): they share one bucket rather than going unlimited.
pub(in crate::transport::http) const UNKNOWN_ADDRESS_KEY: &str = "a:unknown";

/// Whether the TCP peer of `req` is one of [`HttpConfig::trusted_proxies`]:
/// only then are `X-Forwarded-*` headers believed.
pub(in crate::transport::http) fn trusted_peer(req: &HttpRequest, config: &HttpConfig) -> bool {
    req.peer_addr()
        .is_some_and(|peer| is_trusted(peer.ip(), &config.trusted_proxies))
}

fn is_trusted(ip: IpAddr, trusted: &[IpAddr]) -> bool {
    let ip = ip.to_canonical();
    trusted.iter().any(|t| t.to_canonical() == ip)
}

/// An `X-Forwarded-For` entry: an address, possibly with a port.
fn parse_hop(hop: &str) -> Option<IpAddr> {
    let hop = hop.trim();
    hop.parse::<IpAddr>()
        .ok()
        .or_else(|| hop.parse::<SocketAddr>().ok().map(|s| s.ip()))
}

/// The client's address: the peer's, or, when the peer is a trusted proxy,
/// the nearest `X-Forwarded-For` hop that is not itself a trusted proxy
/// (read from the right: the entries on the left are the client's to write).
/// An unreadable hop stops the walk at the last trusted one. `None` without a
/// peer address.
pub(in crate::transport::http) fn client_ip(
    req: &HttpRequest,
    config: &HttpConfig,
) -> Option<IpAddr> {
    let peer = req.peer_addr()?.ip();
    if !is_trusted(peer, &config.trusted_proxies) {
        return Some(peer);
    }
    let hops: Vec<&str> = req
        .headers()
        .get_all("x-forwarded-for")
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .collect();
    let mut client = peer;
    for hop in hops.iter().rev() {
        match parse_hop(hop) {
            Some(ip) if is_trusted(ip, &config.trusted_proxies) => client = ip,
            Some(ip) => return Some(ip),
            None => break,
        }
    }
    Some(client)
}

/// The key limits per client address count by: `a:<IPv4>`, `a:<IPv6
/// network>/<prefix>` (an IPv6 host usually has a whole /64 to pick
/// addresses from), or [`UNKNOWN_ADDRESS_KEY`] without an address.
/// IPv4-mapped IPv6 addresses count as IPv4.
pub(in crate::transport::http) fn address_key(ip: Option<IpAddr>, ipv6_prefix: u8) -> String {
    match ip.map(|ip| ip.to_canonical()) {
        None => UNKNOWN_ADDRESS_KEY.to_owned(),
        Some(IpAddr::V4(v4)) => format!("a:{v4}"),
        Some(IpAddr::V6(v6)) => {
            let prefix = ipv6_prefix.min(128);
            let mask = match prefix {
                0 => 0,
                p => u128::MAX << (128 - u32::from(p)),
            };
            let network = Ipv6Addr::from(u128::from(v6) & mask);
            format!("a:{network}/{prefix}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::test::TestRequest;

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap())
    }

    #[test]
    fn ipv6_clients_are_grouped_by_their_prefix() {
        let a = address_key(ip("2001:db8:1:2:aaaa::1"), 64);
        assert_eq!(a, "a:2001:db8:1:2::/64");
        assert_eq!(address_key(ip("2001:db8:1:2:ffff:1:2:3"), 64), a);
        assert_ne!(address_key(ip("2001:db8:1:3::1"), 64), a);
        // A configurable prefix: /48 groups the two, /128 separates hosts.
        assert_eq!(
            address_key(ip("2001:db8:1:3::1"), 48),
            address_key(ip("2001:db8:1:2::1"), 48)
        );
        assert_ne!(
            address_key(ip("2001:db8::1"), 128),
            address_key(ip("2001:db8::2"), 128)
        );
        assert_eq!(address_key(ip("2001:db8::1"), 0), "a:::/0");
        // IPv4 is per address; IPv4-mapped IPv6 counts as IPv4.
        assert_eq!(address_key(ip("192.0.2.7"), 64), "a:192.0.2.7");
        assert_eq!(address_key(ip("::ffff:192.0.2.7"), 64), "a:192.0.2.7");
        assert_ne!(address_key(ip("192.0.2.8"), 64), "a:192.0.2.7");
        // No address: one shared key, never none.
        assert_eq!(address_key(None, 64), UNKNOWN_ADDRESS_KEY);
    }

    #[test]
    fn forwarded_addresses_count_only_from_a_trusted_proxy() {
        let mut config = HttpConfig::default();
        let from = |peer: &str, xff: Option<&str>, config: &HttpConfig| {
            let mut req = TestRequest::default().peer_addr(peer.parse().unwrap());
            if let Some(v) = xff {
                req = req.insert_header(("x-forwarded-for", v));
            }
            client_ip(&req.to_http_request(), config)
        };
        // No trusted proxy: the header is the client's own words.
        assert_eq!(
            from("198.51.100.1:1", Some("203.0.113.9"), &config),
            ip("198.51.100.1")
        );
        config.trusted_proxies = vec!["10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap()];
        // From the proxy: the nearest untrusted hop, read from the right.
        assert_eq!(
            from(
                "10.0.0.1:1",
                Some("6.6.6.6, 203.0.113.9, 10.0.0.2"),
                &config
            ),
            ip("203.0.113.9")
        );
        assert_eq!(from("10.0.0.1:1", None, &config), ip("10.0.0.1"));
        assert_eq!(from("10.0.0.1:1", Some("garbage"), &config), ip("10.0.0.1"));
        assert_eq!(
            from("10.0.0.1:1", Some("[2001:db8::5]:443"), &config),
            ip("2001:db8::5")
        );
        // Not from the proxy: ignored.
        assert_eq!(
            from("198.51.100.1:1", Some("203.0.113.9"), &config),
            ip("198.51.100.1")
        );
        assert_eq!(
            client_ip(&TestRequest::default().to_http_request(), &config),
            None
        );
    }
}
