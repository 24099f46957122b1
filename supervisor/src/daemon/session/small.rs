//! Sorted vectors for the session core's per-task indexes: a session holds
//! a few tasks, and a `BTreeMap`'s node always has room for eleven entries
//! (with 5 tasks, the tasks' views alone cost 2.5 KB a session; 1,000
//! sessions at start-up, issue 23 item 2). Sized to fit: one more slot per
//! insert, never a doubling. Lookups are binary searches; an insert or a
//! removal moves the entries after it, which stays cheap for what these hold
//! (a session's plans and tasks, not its messages).

use std::borrow::Borrow;
use std::cmp::Ordering;

/// A sorted set of values, as small as it can be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct SortedVec<T>(Vec<T>);

impl<T> Default for SortedVec<T> {
    fn default() -> Self {
        SortedVec(Vec::new())
    }
}

impl<T: Ord> SortedVec<T> {
    /// Where `probe` says the value is (`Ok`) or would go (`Err`).
    pub(super) fn find_by(&self, probe: impl FnMut(&T) -> Ordering) -> Result<usize, usize> {
        self.0.binary_search_by(probe)
    }

    /// Adds a value; whether it was new.
    pub(super) fn insert(&mut self, value: T) -> bool {
        match self.0.binary_search(&value) {
            Ok(_) => false,
            Err(at) => {
                self.0.reserve_exact(1);
                self.0.insert(at, value);
                true
            }
        }
    }

    /// Removes the value `probe` finds; whether there was one.
    pub(super) fn remove_by(&mut self, probe: impl FnMut(&T) -> Ordering) -> bool {
        match self.find_by(probe) {
            Ok(at) => {
                self.0.remove(at);
                true
            }
            Err(_) => false,
        }
    }

    /// The values from where `probe` says the range starts, in order.
    pub(super) fn starting_at(&self, probe: impl FnMut(&T) -> Ordering) -> &[T] {
        let at = self.find_by(probe).unwrap_or_else(|at| at);
        &self.0[at..]
    }

    /// In order.
    pub(super) fn iter(&self) -> std::slice::Iter<'_, T> {
        self.0.iter()
    }
}

impl<T: Ord> FromIterator<T> for SortedVec<T> {
    /// Collected in any order, duplicates dropped, sized to fit.
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let mut values: Vec<T> = iter.into_iter().collect();
        values.sort();
        values.dedup();
        values.shrink_to_fit();
        SortedVec(values)
    }
}

/// A map of sorted keys, as small as it can be.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SortedMap<K, V>(Vec<(K, V)>);

impl<K, V> Default for SortedMap<K, V> {
    fn default() -> Self {
        SortedMap(Vec::new())
    }
}

impl<K: Ord, V> SortedMap<K, V> {
    fn find<Q: Ord + ?Sized>(&self, key: &Q) -> Result<usize, usize>
    where
        K: Borrow<Q>,
    {
        self.0.binary_search_by(|(k, _)| k.borrow().cmp(key))
    }

    /// The value of `key`.
    pub(crate) fn get<Q: Ord + ?Sized>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
    {
        self.find(key).ok().map(|at| &self.0[at].1)
    }

    /// The value of `key`, to change.
    pub(super) fn get_mut<Q: Ord + ?Sized>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
    {
        self.find(key).ok().map(|at| &mut self.0[at].1)
    }

    /// Whether `key` has a value.
    pub(crate) fn contains_key<Q: Ord + ?Sized>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
    {
        self.find(key).is_ok()
    }

    /// Sets the value of `key`; the one it replaces.
    pub(super) fn insert(&mut self, key: K, value: V) -> Option<V> {
        match self.find(&key) {
            Ok(at) => Some(std::mem::replace(&mut self.0[at].1, value)),
            Err(at) => {
                self.0.reserve_exact(1);
                self.0.insert(at, (key, value));
                None
            }
        }
    }

    /// The value of `key`, a default one added when missing (`make` turns
    /// the borrowed key into an owned one only then).
    pub(super) fn entry_or_default<Q: Ord + ?Sized>(
        &mut self,
        key: &Q,
        make: impl FnOnce(&Q) -> K,
    ) -> &mut V
    where
        K: Borrow<Q>,
        V: Default,
    {
        let at = match self.find(key) {
            Ok(at) => at,
            Err(at) => {
                self.0.reserve_exact(1);
                self.0.insert(at, (make(key), V::default()));
                at
            }
        };
        &mut self.0[at].1
    }

    /// The value of the key `probe` finds (keys that borrow as no single
    /// type: pairs).
    pub(super) fn get_by(&self, probe: impl FnMut(&K) -> Ordering) -> Option<&V> {
        let mut probe = probe;
        let at = self.0.binary_search_by(|(k, _)| probe(k)).ok()?;
        Some(&self.0[at].1)
    }

    /// [`Self::get_by`], to change.
    pub(super) fn get_mut_by(&mut self, probe: impl FnMut(&K) -> Ordering) -> Option<&mut V> {
        let mut probe = probe;
        let at = self.0.binary_search_by(|(k, _)| probe(k)).ok()?;
        Some(&mut self.0[at].1)
    }

    /// Removes the key `probe` finds; its value.
    pub(super) fn remove_by(&mut self, probe: impl FnMut(&K) -> Ordering) -> Option<V> {
        let mut probe = probe;
        let at = self.0.binary_search_by(|(k, _)| probe(k)).ok()?;
        Some(self.0.remove(at).1)
    }

    /// The value of the key `probe` finds, `make()`'s key with a default
    /// value added when missing.
    pub(super) fn entry_by_or_default(
        &mut self,
        probe: impl FnMut(&K) -> Ordering,
        make: impl FnOnce() -> K,
    ) -> &mut V
    where
        V: Default,
    {
        let mut probe = probe;
        let at = match self.0.binary_search_by(|(k, _)| probe(k)) {
            Ok(at) => at,
            Err(at) => {
                self.0.reserve_exact(1);
                self.0.insert(at, (make(), V::default()));
                at
            }
        };
        &mut self.0[at].1
    }

    /// Removes `key`; its value.
    pub(super) fn remove<Q: Ord + ?Sized>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
    {
        self.find(key).ok().map(|at| self.0.remove(at).1)
    }

    /// How many keys.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// (key, value) pairs, by key.
    pub(crate) fn iter(&self) -> impl DoubleEndedIterator<Item = (&K, &V)> {
        self.0.iter().map(|(k, v)| (k, v))
    }

    /// Keys, in order.
    pub(crate) fn keys(&self) -> impl DoubleEndedIterator<Item = &K> {
        self.0.iter().map(|(k, _)| k)
    }

    /// Values, by key.
    pub(crate) fn values(&self) -> impl DoubleEndedIterator<Item = &V> {
        self.0.iter().map(|(_, v)| v)
    }
}

impl<K: Ord, V> FromIterator<(K, V)> for SortedMap<K, V> {
    /// Collected in any order, sized to fit; of a key given twice the last
    /// value counts (as a `BTreeMap` collects).
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut pairs: Vec<(K, V)> = iter.into_iter().collect();
        // Stable: a key's values stay in the order given.
        pairs.sort_by(|a, b| a.0.cmp(&b.0));
        pairs.dedup_by(|later, kept| {
            let same = later.0 == kept.0;
            if same {
                std::mem::swap(&mut later.1, &mut kept.1);
            }
            same
        });
        pairs.shrink_to_fit();
        SortedMap(pairs)
    }
}

impl<K: Ord + Borrow<str>, V> std::ops::Index<&str> for SortedMap<K, V> {
    type Output = V;

    fn index(&self, key: &str) -> &V {
        match self.get(key) {
            Some(v) => v,
            None => panic!("no entry {key:?}"),
        }
    }
}

/// A sorted set of file names, as small as it can be: nearly every task
/// has one plan and one progress file, and a `BTreeSet` of one name costs
/// a 280-byte node (2.8 MB of a start-up with 5,000 tasks, heaptrack).
#[derive(Debug, Clone, Default)]
pub(super) struct Names(pub(super) Vec<Box<str>>);

impl Names {
    pub(super) fn find(&self, name: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|n| (**n).cmp(name))
    }

    pub(super) fn insert(&mut self, name: &str) {
        if let Err(at) = self.find(name) {
            // One more slot, not a doubling: these sets stay tiny.
            self.0.reserve_exact(1);
            self.0.insert(at, name.into());
        }
    }

    pub(super) fn remove(&mut self, name: &str) {
        if let Ok(at) = self.find(name) {
            self.0.remove(at);
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(super) fn first(&self) -> Option<&str> {
        self.0.first().map(|n| &**n)
    }

    /// In name order.
    pub(super) fn iter(&self) -> impl DoubleEndedIterator<Item = &str> {
        self.0.iter().map(|n| &**n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    proptest! {
        /// Any sequence of inserts and removals leaves the same entries,
        /// in the same order, as a `BTreeMap` given the same sequence.
        #[test]
        fn a_sorted_map_agrees_with_a_btreemap(ops in proptest::collection::vec((any::<bool>(), 0u8..16, any::<u8>()), 0..64)) {
            let mut ours: SortedMap<Box<str>, u8> = SortedMap::default();
            let mut theirs: BTreeMap<String, u8> = BTreeMap::new();
            for (add, k, v) in ops {
                let key = format!("task_{k}");
                if add {
                    prop_assert_eq!(ours.insert(key.as_str().into(), v), theirs.insert(key.clone(), v));
                } else {
                    prop_assert_eq!(ours.remove(key.as_str()), theirs.remove(&key));
                }
                *ours.entry_or_default("task_x", |k| k.into()) += 1;
                *theirs.entry("task_x".to_string()).or_default() += 1;
                prop_assert_eq!(ours.get(key.as_str()), theirs.get(&key));
                let a: Vec<(&str, u8)> = ours.iter().map(|(k, v)| (&**k, *v)).collect();
                let b: Vec<(&str, u8)> = theirs.iter().map(|(k, v)| (k.as_str(), *v)).collect();
                prop_assert_eq!(a, b);
            }
        }
    }

    #[test]
    fn a_sorted_set_keeps_one_of_each_in_order() {
        let mut s: SortedVec<(u8, u8)> = SortedVec::default();
        assert!(s.insert((2, 1)));
        assert!(s.insert((1, 9)));
        assert!(s.insert((2, 0)));
        assert!(!s.insert((1, 9)));
        let all: Vec<_> = s.iter().copied().collect();
        assert_eq!(all, [(1, 9), (2, 0), (2, 1)]);
        assert_eq!(
            s.starting_at(|p| p.0.cmp(&2).then(Ordering::Greater)),
            [(2, 0), (2, 1)]
        );
        assert!(s.remove_by(|p| p.cmp(&(2, 0))));
        assert!(!s.remove_by(|p| p.cmp(&(2, 0))));
        assert_eq!(s.iter().count(), 2);
    }

    proptest! {
        /// Collected from any order, as a `BTreeMap` / `BTreeSet` collects
        /// (the last value of a key counts), with no spare slot.
        #[test]
        fn collected_equals_the_btree_collected(pairs in proptest::collection::vec((0u8..8, any::<u8>()), 0..24)) {
            let ours: SortedMap<u8, u8> = pairs.iter().copied().collect();
            let theirs: std::collections::BTreeMap<u8, u8> = pairs.iter().copied().collect();
            let a: Vec<(u8, u8)> = ours.iter().map(|(k, v)| (*k, *v)).collect();
            let b: Vec<(u8, u8)> = theirs.into_iter().collect();
            prop_assert_eq!(&a, &b);
            prop_assert_eq!(ours.0.capacity(), a.len());
            let ours: SortedVec<u8> = pairs.iter().map(|p| p.0).collect();
            let theirs: std::collections::BTreeSet<u8> = pairs.iter().map(|p| p.0).collect();
            prop_assert!(ours.iter().copied().eq(theirs.into_iter()));
            prop_assert_eq!(ours.0.capacity(), ours.0.len());
        }
    }
}
