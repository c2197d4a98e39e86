//! [`CommandConn`]: the command connection [`super::RedisOnce`] and the
//! publishing side use, on a single Redis server or a Redis Cluster (where
//! the redis crate routes each command to the master of its key's slot).

use ::redis::aio::{ConnectionLike, MultiplexedConnection};
use ::redis::cluster_async::ClusterConnection;
use ::redis::{Cmd, Pipeline, RedisFuture, Value};

/// A command connection to one Redis server or to a Redis Cluster. Cheap to
/// clone (both are multiplexed handles).
#[derive(Clone)]
pub(super) enum CommandConn {
    /// One server.
    Single(MultiplexedConnection),
    /// A cluster: each command goes to the master of its first key's slot, so
    /// a multi-key command or script must name keys of one slot (hash tags).
    Cluster(ClusterConnection),
}

impl ConnectionLike for CommandConn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            CommandConn::Single(c) => c.req_packed_command(cmd),
            CommandConn::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            CommandConn::Single(c) => c.req_packed_commands(pipeline, offset, count),
            CommandConn::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            CommandConn::Single(c) => c.get_db(),
            CommandConn::Cluster(c) => c.get_db(),
        }
    }
}
