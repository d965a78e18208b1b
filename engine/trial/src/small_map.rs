//! A sorted map stored as a vector, serialised exactly like a `BTreeMap` (a JSON object with
//! sorted keys). A `BTreeMap` allocates a ~400-byte node even for two entries; a record's env
//! and tier timings have a handful, and a 10,000-trial rerun holds 10,000 records.

use serde::de::{Deserialize, Deserializer};
use serde::ser::{Serialize, SerializeMap, Serializer};
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq)]
pub struct SmallMap<V>(Vec<(String, V)>);

impl<V> Default for SmallMap<V> {
    fn default() -> Self {
        SmallMap(Vec::new())
    }
}

impl<V> SmallMap<V> {
    pub fn get(&self, key: &str) -> Option<&V> {
        self.0
            .binary_search_by(|(k, _)| k.as_str().cmp(key))
            .ok()
            .map(|i| &self.0[i].1)
    }

    /// Inserts or replaces, keeping the keys sorted.
    pub fn insert(&mut self, key: String, value: V) {
        match self.0.binary_search_by(|(k, _)| k.as_str().cmp(&key)) {
            Ok(i) => self.0[i].1 = value,
            Err(i) => self.0.insert(i, (key, value)),
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = (&String, &V)> {
        self.0.iter().map(|(k, v)| (k, v))
    }

    pub fn keys(&self) -> impl Iterator<Item = &String> {
        self.0.iter().map(|(k, _)| k)
    }

    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.0.iter().map(|(_, v)| v)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<V> From<BTreeMap<String, V>> for SmallMap<V> {
    fn from(m: BTreeMap<String, V>) -> Self {
        let mut v: Vec<_> = m.into_iter().collect();
        v.shrink_to_fit();
        SmallMap(v)
    }
}

impl<V> FromIterator<(String, V)> for SmallMap<V> {
    fn from_iter<I: IntoIterator<Item = (String, V)>>(iter: I) -> Self {
        iter.into_iter().collect::<BTreeMap<_, _>>().into()
    }
}

impl<V: Clone> From<&SmallMap<V>> for BTreeMap<String, V> {
    fn from(m: &SmallMap<V>) -> Self {
        m.0.iter().cloned().collect()
    }
}

impl<V> std::ops::Index<&str> for SmallMap<V> {
    type Output = V;
    fn index(&self, key: &str) -> &V {
        self.get(key)
            .unwrap_or_else(|| panic!("no key {key:?} in the map"))
    }
}

impl<V: Serialize> Serialize for SmallMap<V> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de, V: Deserialize<'de>> Deserialize<'de> for SmallMap<V> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        BTreeMap::<String, V>::deserialize(d).map(Into::into)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialises_like_a_btreemap_and_stays_sorted() {
        let b: BTreeMap<String, f64> =
            [("tier3".to_string(), 1.0), ("tier1".to_string(), 2.0)].into();
        let mut s: SmallMap<f64> = b.clone().into();
        assert_eq!(
            serde_json::to_string(&s).unwrap(),
            serde_json::to_string(&b).unwrap()
        );
        s.insert("tier2".into(), 3.0);
        s.insert("tier1".into(), 4.0);
        assert_eq!(
            serde_json::to_string(&s).unwrap(),
            r#"{"tier1":4.0,"tier2":3.0,"tier3":1.0}"#
        );
        let back: SmallMap<f64> = serde_json::from_str(r#"{"b":1,"a":2}"#).unwrap();
        assert_eq!(back.keys().collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(back["a"], 2.0);
        assert_eq!(back.get("c"), None);
    }
}
