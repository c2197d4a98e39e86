//! The cluster's masters and the slots each serves, by `CLUSTER SLOTS`.

use std::time::Duration;

use ::redis::Value;
use ::redis::cluster_async::ClusterConnection;

/// One master of the slot map: its address and the slot ranges it serves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Master {
    pub(super) host: String,
    pub(super) port: u16,
    pub(super) ranges: Vec<(u16, u16)>,
}

impl Master {
    pub(super) fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

/// The masters of the cluster by `CLUSTER SLOTS` (through the cluster
/// connection, so any reachable node answers).
pub(super) async fn slot_map(
    cmd: &mut ClusterConnection,
    timeout: Duration,
) -> Result<Vec<Master>, String> {
    let mut slots = ::redis::cmd("CLUSTER");
    slots.arg("SLOTS");
    let query = slots.query_async::<Value>(cmd);
    let reply = match tokio::time::timeout(timeout, query).await {
        Ok(Ok(reply)) => reply,
        Ok(Err(e)) => return Err(format!("CLUSTER SLOTS failed: {e}")),
        Err(_) => return Err(format!("CLUSTER SLOTS unanswered in {timeout:?}")),
    };
    parse_slots(reply)
}

/// The masters of a `CLUSTER SLOTS` reply, each with its slot ranges.
fn parse_slots(reply: Value) -> Result<Vec<Master>, String> {
    let Value::Array(ranges) = reply else {
        return Err("CLUSTER SLOTS: not an array".into());
    };
    let mut masters: Vec<Master> = Vec::new();
    for range in ranges {
        let Value::Array(items) = range else {
            return Err("CLUSTER SLOTS: a range is not an array".into());
        };
        let (Some(Value::Int(lo)), Some(Value::Int(hi)), Some(Value::Array(node))) =
            (items.first(), items.get(1), items.get(2))
        else {
            return Err("CLUSTER SLOTS: a range without its master".into());
        };
        let host = match node.first() {
            Some(Value::BulkString(h)) => String::from_utf8_lossy(h).into_owned(),
            Some(Value::SimpleString(h)) => h.clone(),
            _ => return Err("CLUSTER SLOTS: a master without its host".into()),
        };
        let Some(Value::Int(port)) = node.get(1) else {
            return Err("CLUSTER SLOTS: a master without its port".into());
        };
        let (Ok(lo), Ok(hi), Ok(port)) =
            (u16::try_from(*lo), u16::try_from(*hi), u16::try_from(*port))
        else {
            return Err("CLUSTER SLOTS: a slot or port out of range".into());
        };
        match masters
            .iter_mut()
            .find(|m| m.host == host && m.port == port)
        {
            Some(m) => m.ranges.push((lo, hi)),
            None => masters.push(Master {
                host,
                port,
                ranges: vec![(lo, hi)],
            }),
        }
    }
    if masters.is_empty() {
        return Err("CLUSTER SLOTS: no slot is served".into());
    }
    Ok(masters)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    fn node(port: i64) -> Value {
        Value::Array(vec![bulk("127.0.0.1"), Value::Int(port), bulk("id")])
    }

    #[test]
    fn the_slot_map_groups_each_masters_ranges() {
        let reply = Value::Array(vec![
            Value::Array(vec![
                Value::Int(0),
                Value::Int(5460),
                node(7001),
                node(7004),
            ]),
            Value::Array(vec![Value::Int(5461), Value::Int(10922), node(7002)]),
            Value::Array(vec![Value::Int(10923), Value::Int(16383), node(7001)]),
        ]);
        let masters = parse_slots(reply).expect("a slot map");
        assert_eq!(
            masters,
            vec![
                Master {
                    host: "127.0.0.1".into(),
                    port: 7001,
                    ranges: vec![(0, 5460), (10923, 16383)],
                },
                Master {
                    host: "127.0.0.1".into(),
                    port: 7002,
                    ranges: vec![(5461, 10922)],
                },
            ]
        );
        for bad in [
            Value::Array(vec![]),
            Value::Int(1),
            Value::Array(vec![Value::Array(vec![Value::Int(0), Value::Int(1)])]),
            Value::Array(vec![Value::Array(vec![
                Value::Int(0),
                Value::Int(70000),
                node(7001),
            ])]),
        ] {
            assert!(parse_slots(bad).is_err());
        }
    }
}
