//! Resources: [`ResourceProvider`]s that own a URI prefix, [`ResourceSet`]
//! (static contents, closures, templates), what a read returns, and URI
//! templates (`template`, RFC 6570 levels 1-2).

mod resource;
mod template;

pub use resource::{
    ReadOutcome, ReadResult, Resource, ResourceProvider, ResourceRead, ResourceSet,
    ResourceTemplate,
};
