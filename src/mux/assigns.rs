use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::Arc;

/// Application data attached to a request before dispatch (for example the
/// authenticated principal), readable from every [`super::Channel`] of that request.
///
/// ```
/// use genmcp::mux::Assigns;
/// #[derive(Debug, PartialEq)]
/// struct Principal(String);
/// let assigns = Assigns::new().with(Principal("ada".into()));
/// assert_eq!(assigns.get::<Principal>(), Some(&Principal("ada".into())));
/// assert_eq!(assigns.get::<u32>(), None);
/// ```
#[derive(Clone, Default)]
pub struct Assigns {
    map: HashMap<TypeId, Arc<dyn Any + Send + Sync>>,
}

impl std::fmt::Debug for Assigns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Assigns")
            .field("len", &self.map.len())
            .finish()
    }
}

impl Assigns {
    /// No assigns.
    pub fn new() -> Self {
        Self::default()
    }

    /// With `value` attached (replacing any value of the same type).
    pub fn with<T: Any + Send + Sync>(mut self, value: T) -> Self {
        self.map.insert(TypeId::of::<T>(), Arc::new(value));
        self
    }

    /// The value of type `T`, if attached.
    pub fn get<T: Any + Send + Sync>(&self) -> Option<&T> {
        self.map.get(&TypeId::of::<T>())?.downcast_ref::<T>()
    }
}
