use std::any::{Any, TypeId};
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
/// // A second value of a type replaces the first.
/// let assigns = assigns.with(Principal("grace".into()));
/// assert_eq!(assigns.get::<Principal>(), Some(&Principal("grace".into())));
/// ```
#[derive(Clone, Default)]
pub struct Assigns {
    /// One entry per type, in the order attached. A request carries a handful
    /// (the principal, the client address, the limit key and the
    /// application's own), so a scan beats hashing each `TypeId`.
    entries: Vec<(TypeId, Arc<dyn Any + Send + Sync>)>,
}

impl std::fmt::Debug for Assigns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Assigns")
            .field("len", &self.entries.len())
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
        let id = TypeId::of::<T>();
        let value: Arc<dyn Any + Send + Sync> = Arc::new(value);
        match self.entries.iter_mut().find(|(t, _)| *t == id) {
            Some(entry) => entry.1 = value,
            None => self.entries.push((id, value)),
        }
        self
    }

    /// The value of type `T`, if attached.
    pub fn get<T: Any + Send + Sync>(&self) -> Option<&T> {
        let id = TypeId::of::<T>();
        let (_, value) = self.entries.iter().find(|(t, _)| *t == id)?;
        value.downcast_ref::<T>()
    }
}
