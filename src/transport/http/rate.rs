//! Requests per second per principal: a token bucket for each principal (or
//! client address), in a bounded table.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

/// Default number of principals / addresses whose buckets are kept.
pub const DEFAULT_MAX_RATE_PRINCIPALS: usize = 10_000;

/// A request rate per principal (or per client address without one): a
/// token bucket of `burst` requests refilled at `per_second`. Past it: HTTP
/// 429 with `Retry-After` and `-32603` "Too many requests",
/// `data.limit = "requests_per_second"`, before the body is read.
///
/// Buckets are kept for at most `max_principals` keys (default
/// [`DEFAULT_MAX_RATE_PRINCIPALS`]; about 100 bytes each). When a new key
/// finds the table full, buckets that have refilled completely are dropped
/// (they are the same as a new one), and if none has, the least recently
/// used tenth of the table: those principals' next requests start with a full
/// burst again. That sweep is a scan of the table under its lock, paid by a
/// new key only when the table is full, so at most once per tenth of the
/// table's keys.
///
/// ```
/// use genmcp::http::RateLimit;
/// let limit = RateLimit::per_second(20).burst(40);
/// assert_eq!(limit.burst, 40);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct RateLimit {
    /// Sustained requests per second.
    pub per_second: f64,
    /// Requests allowed at once after a quiet spell (default: `per_second`,
    /// at least 1).
    pub burst: u32,
    /// Principals / addresses tracked at once (default
    /// [`DEFAULT_MAX_RATE_PRINCIPALS`]).
    pub max_principals: usize,
}

impl RateLimit {
    /// `n` requests per second (at least 1), burst `n`.
    pub fn per_second(n: u32) -> Self {
        let n = n.max(1);
        RateLimit {
            per_second: f64::from(n),
            burst: n,
            max_principals: DEFAULT_MAX_RATE_PRINCIPALS,
        }
    }

    /// `n` per minute (at least 1), burst `n`: for rare events such as failed
    /// authentications.
    ///
    /// ```
    /// use genmcp::http::RateLimit;
    /// let limit = RateLimit::per_minute(20);
    /// assert_eq!(limit.burst, 20);
    /// assert!((limit.per_second - 20.0 / 60.0).abs() < 1e-9);
    /// ```
    pub fn per_minute(n: u32) -> Self {
        let n = n.max(1);
        RateLimit {
            per_second: f64::from(n) / 60.0,
            burst: n,
            max_principals: DEFAULT_MAX_RATE_PRINCIPALS,
        }
    }

    /// With this burst (at least 1).
    pub fn burst(mut self, burst: u32) -> Self {
        self.burst = burst.max(1);
        self
    }

    /// Tracking at most `n` principals (at least 1).
    pub fn max_principals(mut self, n: usize) -> Self {
        self.max_principals = n.max(1);
        self
    }
}

#[derive(Clone, Copy)]
struct Bucket {
    tokens: f64,
    last: Instant,
}

/// The buckets of one endpoint.
pub(crate) struct RateLimiter {
    limit: RateLimit,
    buckets: Mutex<HashMap<String, Bucket>>,
}

impl RateLimiter {
    pub(crate) fn new(limit: RateLimit) -> Self {
        RateLimiter {
            limit,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Takes one request for `key` at `now`: `Err(seconds)` to wait when its
    /// bucket is empty.
    pub(crate) fn check(&self, key: &str, now: Instant) -> Result<(), u64> {
        self.take(key, now)
    }

    /// Spends one token of `key` at `now` (an event that happened: a failed
    /// authentication): `Err(seconds)` when the bucket was already empty.
    pub(crate) fn take(&self, key: &str, now: Instant) -> Result<(), u64> {
        let rate = self.limit.per_second.max(f64::MIN_POSITIVE);
        let burst = f64::from(self.limit.burst.max(1));
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        if !buckets.contains_key(key) {
            if buckets.len() >= self.limit.max_principals {
                evict(&mut buckets, |b| {
                    b.tokens + now.saturating_duration_since(b.last).as_secs_f64() * rate >= burst
                });
            }
            buckets.insert(
                key.to_owned(),
                Bucket {
                    tokens: burst,
                    last: now,
                },
            );
        }
        let Some(bucket) = buckets.get_mut(key) else {
            return Ok(());
        };
        let elapsed = now.saturating_duration_since(bucket.last).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * rate).min(burst);
        bucket.last = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            Err(wait_secs(bucket.tokens, rate))
        }
    }

    /// Gives back one token of `key` taken by [`RateLimiter::take`] for an
    /// event that then did not happen (a reserved failure whose token was
    /// good); never past the burst, and nothing for a key no longer tracked.
    pub(crate) fn refund(&self, key: &str) {
        let burst = f64::from(self.limit.burst.max(1));
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(bucket) = buckets.get_mut(key) {
            bucket.tokens = (bucket.tokens + 1.0).min(burst);
        }
    }

    /// The sustained rate.
    pub(crate) fn per_second(&self) -> f64 {
        self.limit.per_second
    }

    /// Keys tracked now.
    #[cfg(test)]
    pub(crate) fn tracked(&self) -> usize {
        self.buckets.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

/// Whole seconds until a bucket holding `tokens` has one, at `rate` per second.
fn wait_secs(tokens: f64, rate: f64) -> u64 {
    let wait = (1.0 - tokens) / rate;
    // Saturating float-to-int conversion; at least one second.
    (wait.ceil() as u64).max(1)
}

/// Makes room in a full table: drops every bucket that has refilled
/// completely (`full`: it is the same as a new one); if none has, the least
/// recently used tenth at once, so a stream of new keys pays one scan per
/// tenth of the table rather than one per request.
fn evict(buckets: &mut HashMap<String, Bucket>, full: impl Fn(&Bucket) -> bool) {
    let before = buckets.len();
    buckets.retain(|_, b| !full(b));
    if buckets.len() < before || buckets.is_empty() {
        return;
    }
    let mut by_age: Vec<(Instant, &String)> = buckets.iter().map(|(k, b)| (b.last, k)).collect();
    let n = (by_age.len() / 10).max(1);
    by_age.select_nth_unstable_by_key(n - 1, |(last, _)| *last);
    let oldest: Vec<String> = by_age[..n].iter().map(|(_, k)| (*k).clone()).collect();
    for k in oldest {
        buckets.remove(&k);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_bucket_allows_its_burst_then_refills() {
        let r = RateLimiter::new(RateLimit::per_second(2).burst(3));
        let t0 = Instant::now();
        for _ in 0..3 {
            assert_eq!(r.check("a", t0), Ok(()));
        }
        assert_eq!(r.check("a", t0), Err(1));
        // Another principal is unaffected.
        assert_eq!(r.check("b", t0), Ok(()));
        // Half a second later one token is back.
        let t1 = t0 + Duration::from_millis(500);
        assert_eq!(r.check("a", t1), Ok(()));
        assert_eq!(r.check("a", t1), Err(1));
    }

    #[test]
    fn a_refund_gives_back_a_taken_token_never_past_the_burst() {
        let r = RateLimiter::new(RateLimit::per_minute(2));
        let t0 = Instant::now();
        assert_eq!(r.take("a", t0), Ok(()));
        assert_eq!(r.take("a", t0), Ok(()));
        assert_eq!(r.take("a", t0), Err(30));
        r.refund("a");
        assert_eq!(r.take("a", t0), Ok(()));
        r.refund("a");
        r.refund("a");
        r.refund("a");
        assert_eq!(r.take("a", t0), Ok(()));
        assert_eq!(r.take("a", t0), Ok(()));
        assert_eq!(r.take("a", t0), Err(30), "the burst bounds refunds");
        r.refund("unknown");
        assert_eq!(r.tracked(), 1);
    }

    /// 100,000 distinct principals: the table never holds more than its bound.
    #[test]
    fn the_table_is_bounded_under_many_principals() {
        let r = RateLimiter::new(RateLimit::per_second(1).max_principals(100));
        let t0 = Instant::now();
        for i in 0..100_000u32 {
            assert_eq!(r.check(&format!("p{i}"), t0), Ok(()));
            assert!(r.tracked() <= 100);
        }
        // A principal that spent its burst is remembered while the table is
        // not full of others.
        let r = RateLimiter::new(RateLimit::per_second(1).max_principals(2));
        assert_eq!(r.check("x", t0), Ok(()));
        assert_eq!(r.check("y", t0), Ok(()));
        assert_eq!(r.check("x", t0), Err(1));
        // A table full of active buckets drops its least recently used tenth
        // for a new key (here 2 of 20), not one bucket per new key.
        let r = RateLimiter::new(RateLimit::per_second(1).burst(2).max_principals(20));
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        for i in 0..20u64 {
            assert_eq!(r.check(&format!("k{i}"), at(i)), Ok(()));
        }
        assert_eq!(r.check("new", at(20)), Ok(()));
        assert_eq!(r.tracked(), 19);
        // k2 was kept (one token left); k0 was forgotten (a full burst again).
        assert_eq!(r.check("k2", at(21)), Ok(()));
        assert_eq!(r.check("k2", at(21)), Err(1));
        assert_eq!(r.check("k0", at(21)), Ok(()));
        assert_eq!(r.check("k0", at(21)), Ok(()));
    }
}
