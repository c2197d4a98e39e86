//! Named items in insertion order, with a name index: replacing an item keeps
//! its place, removing one shifts the later ones.

use std::collections::HashMap;
use std::sync::Arc;

/// Named items in insertion order with a name index.
pub(crate) struct Ordered<T: ?Sized> {
    items: Vec<(String, Arc<T>)>,
    index: HashMap<String, usize>,
}

impl<T: ?Sized> Ordered<T> {
    pub(crate) fn new() -> Self {
        Ordered {
            items: Vec::new(),
            index: HashMap::new(),
        }
    }

    pub(crate) fn insert(&mut self, name: String, item: Arc<T>) {
        match self.index.get(&name) {
            Some(&i) => self.items[i].1 = item,
            None => {
                self.index.insert(name.clone(), self.items.len());
                self.items.push((name, item));
            }
        }
    }

    pub(crate) fn remove(&mut self, name: &str) -> bool {
        let Some(i) = self.index.remove(name) else {
            return false;
        };
        self.items.remove(i);
        for (j, (n, _)) in self.items.iter().enumerate().skip(i) {
            self.index.insert(n.clone(), j);
        }
        true
    }

    pub(crate) fn get(&self, name: &str) -> Option<Arc<T>> {
        self.index.get(name).map(|&i| self.items[i].1.clone())
    }

    pub(crate) fn values(&self) -> Vec<Arc<T>> {
        self.items.iter().map(|(_, v)| v.clone()).collect()
    }

    pub(crate) fn names(&self) -> Vec<String> {
        self.items.iter().map(|(n, _)| n.clone()).collect()
    }
}
